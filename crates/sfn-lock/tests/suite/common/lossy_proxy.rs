//! A TCP proxy in front of the local DynamoDB server that loses one answer:
//! the first request reaches the server and lands, and its connection is closed
//! before the answer reaches the caller, so the SDK sees the connection closed
//! (hyper's IncompleteMessage, a transient error) and retries after its backoff. (Closing rather than going silent keeps the test free of
//! timing: a silent connection would need a short attempt timeout, which a
//! slow answer on a busy machine could also trip.)

use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::DynamoStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::table_name;

/// A store whose requests go to `endpoint`, retrying up to 5 attempts. The
/// timeouts only bound a broken test; the lost answer is a closed connection.
pub async fn store_via(endpoint: &str) -> DynamoStore {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(10))
        .operation_attempt_timeout(Duration::from_secs(30))
        .operation_timeout(Duration::from_secs(120))
        .build();
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(5))
        .build();
    DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), table_name())
}

/// Starts the proxy and returns its URL and a receiver that fires once the
/// first answer was lost and `meanwhile` has run.
///
/// The first connection's request is forwarded; when the server starts to
/// answer (it has written by then: the test server serialises requests and
/// produces the whole answer before sending it), `meanwhile` runs, and the
/// answer is dropped with the connection. Every later connection waits until `meanwhile` has finished, then
/// passes through untouched: whatever `meanwhile` does happens, without fail,
/// between the landed first attempt and the retry.
pub async fn losing_first_answer<F>(meanwhile: F) -> (String, oneshot::Receiver<()>)
where
    F: Future<Output = ()> + Send + 'static,
{
    let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB: run under scripts/local-stack.sh")
        .trim_start_matches("http://")
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let (lost, lost_seen) = oneshot::channel();
    let (done, gate) = watch::channel(false);
    tokio::spawn(async move {
        let mut first = Some((meanwhile, lost, done));
        while let Ok((caller, _)) = listener.accept().await {
            let upstream = upstream.clone();
            match first.take() {
                Some((meanwhile, lost, done)) => {
                    tokio::spawn(async move {
                        lose_answer(caller, &upstream, meanwhile, done, lost).await;
                    });
                }
                None => {
                    let mut gate = gate.clone();
                    tokio::spawn(async move {
                        // Err means the first connection failed; the test sees no `lost`.
                        let _ = gate.wait_for(|done| *done).await;
                        if let Ok(mut server) = TcpStream::connect(&upstream).await {
                            let mut caller = caller;
                            let _ = tokio::io::copy_bidirectional(&mut caller, &mut server).await;
                        }
                    });
                }
            }
        }
    });
    (url, lost_seen)
}

/// Forwards the request, runs `meanwhile` once the server answers, opens the
/// gate, and closes the caller's connection without a byte of the answer.
async fn lose_answer(
    mut caller: TcpStream,
    upstream: &str,
    meanwhile: impl Future<Output = ()>,
    done: watch::Sender<bool>,
    lost: oneshot::Sender<()>,
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut request = vec![0_u8; 64 * 1024];
    let mut answer = [0_u8; 1];
    loop {
        tokio::select! {
            read = caller.read(&mut request) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if server.write_all(&request[..n]).await.is_err() {
                        return;
                    }
                }
            },
            read = server.read(&mut answer) => match read {
                Ok(1..) => break,
                _ => return,
            },
        }
    }
    drop(server);
    meanwhile.await;
    let _ = done.send(true);
    let _ = lost.send(());
    drop(caller);
}
