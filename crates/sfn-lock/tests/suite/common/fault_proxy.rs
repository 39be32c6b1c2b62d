//! An HTTP proxy in front of the local server (moto) that gives chosen
//! requests a fault: an error answer instead of forwarding them (moto never
//! answers S3's `409 ConditionalRequestConflict`, which S3 does when two
//! conditional writes to one key overlap, and a `404 NoSuchKey` for `If-Match`
//! needs the object deleted between a read and a write), or status 0: forward
//! the request, let it land, and close the connection before its answer (the
//! SDK retries a request whose first attempt landed). Every other request
//! passes through. One request per connection: the proxy asks the server to
//! close after its answer, and closes the caller's connection after it.
//! A hook ([`Faults::before_losing_answer`]) runs another client's calls
//! after a request landed and before its caller learns anything, so they land
//! between the write and the caller's retry of it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Answers still to inject, as (HTTP status, S3 error code), and how many were.
#[derive(Clone, Default)]
pub struct Faults {
    pending: Arc<Mutex<VecDeque<(u16, &'static str)>>>,
    injected: Arc<Mutex<Vec<String>>>,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl Faults {
    /// The request lines of the requests answered with a fault.
    pub fn injected(&self) -> Vec<String> {
        self.injected.lock().unwrap().clone()
    }

    /// Runs `hook` once, when the next request given status 0 has landed and
    /// before its caller's connection is closed: whatever `hook` does (through
    /// a client that bypasses this proxy) lands after that request and before
    /// the caller can retry it or read again.
    pub fn before_losing_answer(&self, hook: impl Future<Output = ()> + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::pin(hook));
    }
}

/// Which requests get the faults: sees the head (lower case) and the body.
pub type Matcher = fn(&str, &[u8]) -> bool;

/// A conditional `PutObject` (with `If-Match` or `If-None-Match`).
pub fn conditional_put(head: &str, _: &[u8]) -> bool {
    head.starts_with("put ")
        && (head.contains("\r\nif-match:") || head.contains("\r\nif-none-match:"))
}

/// SSM's `PutParameter` with `Overwrite` false: a generation's create.
pub fn generation_create(head: &str, body: &[u8]) -> bool {
    let body = String::from_utf8_lossy(body);
    head.contains("x-amz-target: amazonssm.putparameter") && body.contains("\"Overwrite\":false")
}

/// Starts the proxy in front of S3; the next conditional `PutObject`s, one
/// per fault, get `faults` in order.
pub async fn s3_fault_proxy(faults: &[(u16, &'static str)]) -> (String, Faults) {
    fault_proxy("AWS_ENDPOINT_URL_S3", conditional_put, faults).await
}

/// Starts the proxy in front of the endpoint `upstream_variable` names; the
/// next requests `matcher` picks, one per fault, get `faults` in order.
pub async fn fault_proxy(
    upstream_variable: &str,
    matcher: Matcher,
    faults: &[(u16, &'static str)],
) -> (String, Faults) {
    let upstream = std::env::var(upstream_variable)
        .expect("the endpoint: run under scripts/local-stack.sh")
        .trim_start_matches("http://")
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let state = Faults::default();
    state.pending.lock().unwrap().extend(faults.iter().copied());
    let shared = state.clone();
    tokio::spawn(async move {
        while let Ok((caller, _)) = listener.accept().await {
            let (upstream, state) = (upstream.clone(), shared.clone());
            tokio::spawn(async move { serve(caller, &upstream, &state, matcher).await });
        }
    });
    (url, state)
}

async fn serve(mut caller: TcpStream, upstream: &str, state: &Faults, matcher: Matcher) {
    let Some((head, body)) = read_request(&mut caller).await else {
        return;
    };
    let fault = match matcher(&head.to_ascii_lowercase(), &body) {
        true => state.pending.lock().unwrap().pop_front(),
        false => None,
    };
    let lose_answer = fault.is_some_and(|(status, _)| status == 0);
    if let Some((status, code)) = fault.filter(|_| !lose_answer) {
        let line = head.lines().next().unwrap_or_default().to_string();
        state.injected.lock().unwrap().push(line);
        // SSM speaks JSON (its requests name an X-Amz-Target), S3 XML.
        let (kind, body) = match head.to_ascii_lowercase().contains("\r\nx-amz-target:") {
            true => (
                "application/x-amz-json-1.1",
                format!("{{\"__type\":\"{code}\",\"message\":\"injected by the test proxy\"}}"),
            ),
            false => (
                "application/xml",
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
                     <Message>injected by the test proxy</Message></Error>"
                ),
            ),
        };
        let answer = format!(
            "HTTP/1.1 {status} Injected\r\nContent-Type: {kind}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = caller.write_all(answer.as_bytes()).await;
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    // One request per connection, so that the next one is inspected too.
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    if server.write_all(head.as_bytes()).await.is_err() || server.write_all(&body).await.is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer).await;
    if lose_answer {
        // Landed; the caller sees its connection closed without an answer,
        // once the hook (if any) is done: the caller waits for it meanwhile.
        let hook = state.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook.await;
        }
        let line = head.lines().next().unwrap_or_default().to_string();
        state.injected.lock().unwrap().push(line);
        return;
    }
    let _ = caller.write_all(&answer).await;
}

/// The request's head (through the blank line) and its body (by Content-Length).
pub async fn read_request(caller: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = caller.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        bytes.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(bytes[..head_end].to_vec()).ok()?;
    // Drop the caller's own Connection header: the proxy sets it.
    let head: String = head
        .split_inclusive("\r\n")
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "the proxy reads bodies by Content-Length only"
    );
    let mut body = bytes[head_end..].to_vec();
    while body.len() < length {
        let n = caller.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}
