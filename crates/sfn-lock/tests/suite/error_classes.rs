//! Every way DynamoDB refuses a request maps to the documented `errorType`:
//! retryable ones to `LockStoreUnavailable`, the rest to
//! `LockStoreMisconfigured`. A small HTTP server on 127.0.0.1 answers each
//! request with one canned DynamoDB error (status, `__type`, message), as
//! DynamoDB's JSON protocol does; moto cannot be made to throttle or fail.

use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::{DynamoStore, EpochMillis, LeaseSeconds, LockError, LockName, LockStore, Owner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `status` with a DynamoDB error body of type `code` to every request.
async fn refusing_server(status: u16, code: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0_u8; 4096];
                // Read the headers and the whole body (Content-Length) before answering.
                loop {
                    let Ok(read) = socket.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let body = format!(
                    r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"simulated {code}"}}"#
                );
                let answer = format!(
                    "HTTP/1.1 {status} Error\r\ncontent-type: application/x-amz-json-1.0\r\n\
                     x-amzn-requestid: test\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

async fn error_type_of(status: u16, code: &'static str) -> &'static str {
    let endpoint = refusing_server(status, code).await;
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        // Retries would only repeat the same answer; keep the test quick.
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .build();
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), "locks");
    let error = tokio::time::timeout(
        Duration::from_secs(30),
        store.acquire(
            &LockName::new("anything").unwrap(),
            &Owner::new("arn:exec:any").unwrap(),
            LeaseSeconds::new("leaseSeconds", 60).unwrap(),
            EpochMillis::now(),
        ),
    )
    .await
    .expect("an answer within 30 s")
    .expect_err("every request is refused");
    LockError::from(error).error_type()
}

#[tokio::test]
async fn each_refusal_maps_to_its_documented_error_type() {
    let cases = [
        (400, "ThrottlingException", "LockStoreUnavailable"),
        (
            400,
            "ProvisionedThroughputExceededException",
            "LockStoreUnavailable",
        ),
        (400, "RequestLimitExceeded", "LockStoreUnavailable"),
        (400, "TransactionConflictException", "LockStoreUnavailable"),
        (500, "InternalServerError", "LockStoreUnavailable"),
        (503, "ServiceUnavailable", "LockStoreUnavailable"),
        (400, "AccessDeniedException", "LockStoreMisconfigured"),
        (400, "ResourceNotFoundException", "LockStoreMisconfigured"),
        (400, "ValidationException", "LockStoreMisconfigured"),
        (400, "UnrecognizedClientException", "LockStoreMisconfigured"),
    ];
    for (status, code, expected) in cases {
        assert_eq!(
            error_type_of(status, code).await,
            expected,
            "{status} {code}"
        );
    }
}
