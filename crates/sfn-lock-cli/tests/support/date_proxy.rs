//! An HTTP proxy in front of the local stack's server that moves the `Date`
//! header of every answer by a fixed number of seconds: the service's clock,
//! as the CLI reads it, is then that far from this host's, and everything
//! else (the store, its answers, the binary) is real. The local server's own
//! clock is this host's, so no other way gives a test a skew it controls
//! without moving a clock other tests share.
//!
//! One request per connection (as crates/sfn-lock/tests/common/fault_proxy.rs
//! does): the proxy asks the server to close after its answer, so the head of
//! every answer is found and rewritten, and it records each request it
//! forwards, so that a test can say which calls the CLI made.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::primitives::{DateTime, DateTimeFormat};

pub struct DateProxy {
    address: String,
    requests: Arc<Mutex<Vec<String>>>,
    rewritten: Arc<AtomicUsize>,
}

impl DateProxy {
    /// Starts the proxy in front of the stack's server (every store's
    /// endpoint names it); answers carry a `Date` `shift_seconds` later than
    /// the server's (earlier if negative).
    pub fn start(shift_seconds: i64) -> DateProxy {
        let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .expect("AWS_ENDPOINT_URL_DYNAMODB: run under scripts/local-stack.sh")
            .trim_start_matches("http://")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rewritten = Arc::new(AtomicUsize::new(0));
        let (seen, count) = (requests.clone(), rewritten.clone());
        std::thread::spawn(move || {
            for caller in listener.incoming() {
                let Ok(caller) = caller else { continue };
                let (upstream, seen, count) = (upstream.clone(), seen.clone(), count.clone());
                std::thread::spawn(move || serve(caller, &upstream, shift_seconds, &seen, &count));
            }
        });
        DateProxy {
            address,
            requests,
            rewritten,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Each request forwarded: its request line, and its `X-Amz-Target`
    /// (DynamoDB's and SSM's operation) if it has one.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// How many answers had their `Date` moved.
    pub fn rewritten(&self) -> usize {
        self.rewritten.load(Ordering::SeqCst)
    }
}

fn serve(
    mut caller: TcpStream,
    upstream: &str,
    shift_seconds: i64,
    requests: &Mutex<Vec<String>>,
    rewritten: &AtomicUsize,
) {
    let Some((head, body)) = read_request(&mut caller) else {
        return;
    };
    let line = head.lines().next().unwrap_or_default().to_string();
    let target = header(&head, "x-amz-target").unwrap_or_default();
    requests
        .lock()
        .unwrap()
        .push(format!("{line} {target}").trim_end().to_string());
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    if server.write_all(head.as_bytes()).is_err() || server.write_all(&body).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        let _ = caller.write_all(&answer);
        return;
    };
    let mut moved = false;
    let answer_head: String = String::from_utf8_lossy(&answer[..end + 4])
        .split_inclusive("\r\n")
        .map(|line| match shifted(line, shift_seconds) {
            Some(date) => {
                moved = true;
                format!("Date: {date}\r\n")
            }
            None => line.to_string(),
        })
        .collect();
    if moved {
        rewritten.fetch_add(1, Ordering::SeqCst);
    }
    let _ = caller.write_all(answer_head.as_bytes());
    let _ = caller.write_all(&answer[end + 4..]);
    let _ = caller.shutdown(Shutdown::Both);
}

/// The `Date` a `Date:` header line names, moved by `seconds`.
fn shifted(line: &str, seconds: i64) -> Option<String> {
    let (name, value) = line.split_once(':')?;
    if !name.eq_ignore_ascii_case("date") {
        return None;
    }
    let date = DateTime::from_str(value.trim(), DateTimeFormat::HttpDate).ok()?;
    DateTime::from_secs(date.secs() + seconds)
        .fmt(DateTimeFormat::HttpDate)
        .ok()
}

pub fn header(head: &str, wanted: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case(wanted)
            .then(|| value.trim().to_string())
    })
}

/// The request's head (without the caller's Connection header: the proxy
/// sets its own) and its body, by Content-Length.
pub fn read_request(caller: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = caller.read(&mut chunk).ok().filter(|&n| n > 0)?;
        bytes.extend_from_slice(&chunk[..n]);
    };
    let head: String = String::from_utf8(bytes[..head_end].to_vec())
        .ok()?
        .split_inclusive("\r\n")
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    let length: usize = header(&head, "content-length")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    let mut body = bytes[head_end..].to_vec();
    while body.len() < length {
        let n = caller.read(&mut chunk).ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}
