//! The SSM store's parameters and clock on the local server: read a lock's
//! generations and hint, move SSM's clock ahead (the server's
//! `/_sfn_lock/ssm-clock`, tests/support/dynamodb_server.py), and hold one
//! request in a proxy while the rest of the world moves on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sfn_lock::aws::config::sdk_config;
use sfn_lock::LockName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, MutexGuard, Notify};

use super::fault_proxy::{read_request, Matcher};
use super::required_env;
use super::stores::SSM_PATH;

/// Tests that move SSM's clock take this first: a jump of minutes between
/// another test's read and its create would make that create too late.
static CLOCK: Mutex<()> = Mutex::const_new(());
/// How far this test binary has moved SSM's clock ahead, in seconds.
static AHEAD: std::sync::Mutex<u64> = std::sync::Mutex::new(0);

/// Held while a test moves SSM's clock; puts it back when dropped, so that
/// the next test (or test binary: the CLI checks its clock against SSM's)
/// starts from the host's clock.
pub struct Serial(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        set_ahead(0);
    }
}

pub async fn serial() -> Serial {
    Serial(CLOCK.lock().await)
}

fn set_ahead(seconds: u64) {
    let url = format!(
        "{}/_sfn_lock/ssm-clock",
        required_env("AWS_ENDPOINT_URL_SSM")
    );
    ureq::post(&url)
        .send_string(&seconds.to_string())
        .expect("set SSM's clock");
    *AHEAD.lock().unwrap_or_else(|e| e.into_inner()) = seconds;
}

/// Moves SSM's clock `seconds` further ahead.
pub fn advance(seconds: u64) {
    let now = *AHEAD.lock().unwrap_or_else(|e| e.into_inner());
    set_ahead(now + seconds);
}

pub fn lock_path(name: &LockName) -> String {
    format!(
        "{SSM_PATH}/{}",
        sfn_lock::store::names::encode_name(name.as_str())
    )
}

/// Every parameter under the lock's folder (generations and `current`),
/// by last name segment, sorted.
pub async fn parameters(name: &LockName) -> Vec<String> {
    let client = aws_sdk_ssm::Client::new(&sdk_config().await);
    let mut names = Vec::new();
    let mut token = None;
    loop {
        let page = client
            .get_parameters_by_path()
            .path(lock_path(name))
            .set_next_token(token)
            .send()
            .await
            .expect("list the lock's parameters");
        names.extend(
            page.parameters()
                .iter()
                .filter_map(|p| p.name()?.rsplit('/').next().map(str::to_string)),
        );
        match page.next_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    names.sort();
    names
}

/// The full names of the parameters directly under `path`, sorted.
pub async fn parameters_under(path: &str) -> Vec<String> {
    let client = aws_sdk_ssm::Client::new(&sdk_config().await);
    let page = client
        .get_parameters_by_path()
        .path(path)
        .send()
        .await
        .expect("list");
    assert!(page.next_token.is_none(), "few enough for one page");
    let mut names: Vec<String> = page
        .parameters()
        .iter()
        .filter_map(|p| p.name().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The lock's generation parameters (not its `current` hint), oldest first.
pub async fn generations(name: &LockName) -> Vec<String> {
    let mut names = parameters(name).await;
    names.retain(|last| last != "current");
    names
}

/// The lock's `current` hint: read, or set to `value` (`None` deletes it).
pub async fn current_hint(name: &LockName, set: Option<Option<String>>) -> Option<String> {
    let client = aws_sdk_ssm::Client::new(&sdk_config().await);
    let current = format!("{}/current", lock_path(name));
    match set {
        None => {
            let got = client.get_parameter().name(current).send().await.ok()?;
            got.parameter().and_then(|p| p.value()).map(str::to_string)
        }
        Some(Some(value)) => {
            client
                .put_parameter()
                .name(current)
                .value(value)
                .overwrite(true)
                .r#type(aws_sdk_ssm::types::ParameterType::String)
                .send()
                .await
                .expect("set the hint");
            None
        }
        Some(None) => {
            client
                .delete_parameter()
                .name(current)
                .send()
                .await
                .expect("delete the hint");
            None
        }
    }
}

/// An SSM store of its own under `path` (a test that lists every lock).
pub async fn ssm_store_at(path: &str) -> sfn_lock::SsmStore {
    sfn_lock::SsmStore::ssm(aws_sdk_ssm::Client::new(&sdk_config().await), path)
}

/// The names directly under `path` (last segment), sorted.
pub async fn last_names_under(path: &str) -> Vec<String> {
    let mut names: Vec<String> = parameters_under(path)
        .await
        .iter()
        .filter_map(|name| name.rsplit('/').next().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// A store client whose SSM requests go to `endpoint`.
pub async fn ssm_store_via(endpoint: &str) -> sfn_lock::SsmStore {
    let config = aws_sdk_ssm::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        .build();
    sfn_lock::SsmStore::ssm(aws_sdk_ssm::Client::from_conf(config), SSM_PATH)
}

/// The first request `matcher` picks waits in the proxy until [`Held::go`]:
/// a caller stalled between its read and its write.
#[derive(Clone, Default)]
pub struct Held {
    arrived: Arc<Notify>,
    go: Arc<Notify>,
    landed: Arc<Notify>,
    taken: Arc<AtomicBool>,
}

impl Held {
    /// Waits until the request is held.
    pub async fn arrived(&self) {
        self.arrived.notified().await
    }

    /// Lets it go on to the server.
    pub fn go(&self) {
        self.go.notify_one()
    }

    /// Waits until the held request was answered by the server.
    pub async fn landed(&self) {
        self.landed.notified().await
    }
}

/// A proxy in front of SSM that holds the first request `matcher` picks.
pub async fn held_proxy(matcher: Matcher) -> (String, Held) {
    let upstream = required_env("AWS_ENDPOINT_URL_SSM")
        .trim_start_matches("http://")
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let held = Held::default();
    let state = held.clone();
    tokio::spawn(async move {
        while let Ok((caller, _)) = listener.accept().await {
            let (upstream, state) = (upstream.clone(), state.clone());
            tokio::spawn(async move { forward(caller, &upstream, &state, matcher).await });
        }
    });
    (url, held)
}

async fn forward(mut caller: TcpStream, upstream: &str, held: &Held, matcher: Matcher) {
    let Some((head, body)) = read_request(&mut caller).await else {
        return;
    };
    let hold =
        matcher(&head.to_ascii_lowercase(), &body) && !held.taken.swap(true, Ordering::SeqCst);
    if hold {
        held.arrived.notify_one();
        held.go.notified().await;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    if server.write_all(head.as_bytes()).await.is_err() || server.write_all(&body).await.is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer).await;
    if hold {
        held.landed.notify_one();
    }
    let _ = caller.write_all(&answer).await;
}

/// SSM's `PutParameter` of a lock's `current` hint.
pub fn hint_put(head: &str, body: &[u8]) -> bool {
    let body = String::from_utf8_lossy(body);
    head.contains("x-amz-target: amazonssm.putparameter") && body.contains("/current\"")
}
