//! An HTTP proxy in front of the local stack's DynamoDB that lets the lock's
//! acquire writes land and loses their answers: the server has done the write
//! (the proxy reads its whole answer first), and the caller sees the
//! connection closed, as after an attempt timeout in the SDK. Release writes
//! (their body names a `:releaseId`) and every read pass through, so that a
//! test can tell whether the CLI cleaned up after an acquire it lost track of.
//!
//! One request per connection, as date_proxy.rs: the proxy asks the server to
//! close after its answer, so each answer is whole when it is dropped or sent.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::date_proxy::{header, read_request};

pub struct LosingProxy {
    address: String,
    lost: Arc<AtomicUsize>,
}

impl LosingProxy {
    /// Loses the answers of the first `lose` acquire writes (`usize::MAX`:
    /// all of them), then passes everything through.
    pub fn start(lose: usize) -> LosingProxy {
        let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .expect("AWS_ENDPOINT_URL_DYNAMODB: run under scripts/local-stack.sh")
            .trim_start_matches("http://")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let lost = Arc::new(AtomicUsize::new(0));
        let counted = lost.clone();
        std::thread::spawn(move || {
            for caller in listener.incoming() {
                let Ok(caller) = caller else { continue };
                let (upstream, counted) = (upstream.clone(), counted.clone());
                std::thread::spawn(move || serve(caller, &upstream, lose, &counted));
            }
        });
        LosingProxy { address, lost }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// How many answers were lost so far.
    pub fn lost(&self) -> usize {
        self.lost.load(Ordering::SeqCst)
    }
}

fn serve(mut caller: TcpStream, upstream: &str, lose: usize, lost: &AtomicUsize) {
    let Some((head, body)) = read_request(&mut caller) else {
        return;
    };
    let target = header(&head, "x-amz-target").unwrap_or_default();
    let acquire_write =
        target.ends_with(".UpdateItem") && !String::from_utf8_lossy(&body).contains(":releaseId");
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    if server.write_all(head.as_bytes()).is_err() || server.write_all(&body).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    let losing = acquire_write
        && lost
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < lose).then_some(n + 1)
            })
            .is_ok();
    if !losing {
        let _ = caller.write_all(&answer);
    }
    let _ = caller.shutdown(Shutdown::Both);
}
