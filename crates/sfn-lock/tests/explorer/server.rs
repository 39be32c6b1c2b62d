//! The real server's side of the wire: a request that lands is forwarded to
//! the local server (moto) and its answer comes back as an [`Answer`] the
//! explorer may still change (a short page, SSM's `Date`) or replace (a
//! service's own throttling answer).

use std::io::Read;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

use super::wire::Parked;

/// Sends `parked` to the real server and returns its answer (status, headers, body).
pub fn forward(parked: &Parked) -> Result<Answer, String> {
    let mut request = ureq::request(&parked.method, &parked.uri);
    for (name, value) in &parked.headers {
        if !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("host") {
            request = request.set(name, value);
        }
    }
    let response = match request.send_bytes(&parked.body) {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(other) => return Err(format!("the local server did not answer: {other}")),
    };
    let status = response.status();
    let headers = response
        .headers_names()
        .into_iter()
        .filter_map(|name| response.header(&name).map(|v| (name.clone(), v.to_owned())))
        .collect();
    let mut body = Vec::new();
    response
        .into_reader()
        .read_to_end(&mut body)
        .map_err(|error| format!("reading the local server's answer: {error}"))?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// An HTTP answer the explorer may still change before the caller sees it.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(status: u16, content_type: &str, body: String) -> Self {
        Answer {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into_bytes(),
        }
    }

    pub fn set_header(&mut self, name: &str, value: String) {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value));
    }

    pub fn into_response(self) -> Result<HttpResponse, ConnectorError> {
        let status = StatusCode::try_from(self.status)
            .map_err(|_| ConnectorError::other("bad status".into(), None))?;
        let mut response = HttpResponse::new(status, SdkBody::from(self.body));
        for (name, value) in self.headers {
            if !name.eq_ignore_ascii_case("content-length") {
                response.headers_mut().append(name, value);
            }
        }
        Ok(response)
    }
}

/// The throttling answer of the service `parked` is for.
pub fn throttled(parked: &Parked) -> Answer {
    match parked.target() {
        Some(target) if target.starts_with("DynamoDB") => Answer::json(
            400,
            "application/x-amz-json-1.0",
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded"}"#.into(),
        ),
        Some(target) if target.starts_with("AWSStepFunctions") => Answer::json(
            400,
            "application/x-amz-json-1.0",
            r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#.into(),
        ),
        Some(_) => Answer::json(
            400,
            "application/x-amz-json-1.1",
            r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#.into(),
        ),
        None => Answer {
            status: 503,
            headers: vec![("content-type".into(), "application/xml".into())],
            body: b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>".to_vec(),
        },
    }
}
