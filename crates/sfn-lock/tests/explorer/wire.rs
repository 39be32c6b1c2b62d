//! The explorer's HTTP client: every request the library's SDK clients send
//! parks here until the scheduler decides its fate (lands and is answered,
//! lands and its answer is lost, fails before landing, is throttled). A
//! request that lands is forwarded to the real local server (moto) while
//! every caller is parked, so the server sees one request at a time, in the
//! order the schedule chose. Step Functions' `SendTaskSuccess` is answered by
//! the task-token model (`tokens.rs`) instead: moto has no task tokens.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use tokio::sync::{oneshot, Notify};

tokio::task_local! {
    /// The wire identity of the operation being polled: its requests are
    /// parked under it. A cell, so that a call Step Functions gave up on,
    /// which runs on, can be told apart from the caller's next call.
    pub static CALLER: Arc<AtomicUsize>;
}

/// One request as the scheduler sees it.
#[derive(Debug)]
pub struct Parked {
    pub caller: usize,
    /// The caller's nth request, to order requests without relying on polling order.
    pub seq: u64,
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Its function gave up on it (`detached`): it lands for nobody.
    pub orphan: bool,
    answer: oneshot::Sender<Result<HttpResponse, ConnectorError>>,
}

impl Parked {
    /// `DynamoDB.PutItem`, `SSM.GetParametersByPath`, `S3.PUT lock/x`, `SFN.SendTaskSuccess`.
    pub fn label(&self) -> String {
        match self.target() {
            Some(target) => {
                let (service, action) = target.split_once('.').unwrap_or(("?", target));
                let service = match service {
                    s if s.starts_with("DynamoDB") => "DynamoDB",
                    s if s.starts_with("AmazonSSM") => "SSM",
                    s if s.starts_with("AWSStepFunctions") => "SFN",
                    other => other,
                };
                format!("{service}.{action}")
            }
            None => {
                let path = self.uri.splitn(4, '/').nth(3).unwrap_or("");
                let path = path.split('?').next().unwrap_or(path);
                let last = path.rsplit('/').next().unwrap_or(path);
                let query = if self.uri.contains("list-type=2") {
                    " (list)"
                } else {
                    ""
                };
                format!("S3.{} …/{last}{query}", self.method)
            }
        }
    }

    pub fn target(&self) -> Option<&str> {
        self.header("x-amz-target")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn is_ssm(&self) -> bool {
        self.target().is_some_and(|t| t.starts_with("AmazonSSM."))
    }

    /// Whether it may change the store (the explorer reads the store back after those).
    pub fn writes(&self) -> bool {
        match self.target() {
            Some(target) => {
                let action = target.rsplit('.').next().unwrap_or(target);
                !target.starts_with("AWSStepFunctions")
                    && ["Put", "Update", "Delete", "TransactWrite", "BatchWrite"]
                        .iter()
                        .any(|verb| action.starts_with(verb))
            }
            None => self.method != "GET" && self.method != "HEAD",
        }
    }

    /// A write of a lock's document on S3 or SSM (an object `PutObject`, a
    /// generation's create), not of a marker or the `current` hint.
    pub fn writes_document(&self) -> bool {
        if self.method == "PUT" && self.target().is_none() {
            return !self.uri.contains(".owners");
        }
        if self.target() != Some("AmazonSSM.PutParameter") {
            return false;
        }
        let body: serde_json::Value = serde_json::from_slice(&self.body).unwrap_or_default();
        let name = body["Name"].as_str().unwrap_or_default();
        body["Overwrite"] == false && !name.contains("/.owners/")
    }

    pub fn is_sfn(&self) -> bool {
        self.target()
            .is_some_and(|t| t.starts_with("AWSStepFunctions."))
    }

    /// A `SendTaskSuccess`'s task token.
    pub fn task_token(&self) -> Option<String> {
        let body: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        body["taskToken"].as_str().map(str::to_owned)
    }

    /// The request without its caller: it lands later, and nobody hears.
    pub fn detached(mut self) -> Parked {
        let (tx, _) = oneshot::channel();
        drop(std::mem::replace(&mut self.answer, tx));
        self.orphan = true;
        self
    }

    pub fn answer(self, answer: Result<HttpResponse, ConnectorError>) {
        // The caller may have crashed (its future dropped): nobody to tell.
        let _ = self.answer.send(answer);
    }
}

/// What crosses the wire: parked requests, and a bell rung whenever a caller parks.
#[derive(Clone, Debug, Default)]
pub struct Wire {
    parked: Arc<Mutex<Vec<Parked>>>,
    seqs: Arc<Mutex<BTreeMap<usize, u64>>>,
    /// The identity cell of each id's latest operation.
    identities: Arc<Mutex<BTreeMap<usize, Arc<AtomicUsize>>>>,
    pub bell: Arc<Notify>,
}

impl Wire {
    pub fn client(&self) -> SharedHttpClient {
        SharedHttpClient::new(WireClient(self.clone()))
    }

    /// The parked requests, in (caller, seq) order: independent of polling order.
    pub fn take_all(&self) -> Vec<Parked> {
        let mut all: Vec<Parked> = std::mem::take(&mut *lock(&self.parked));
        all.sort_by_key(|p| (p.caller, p.seq));
        all
    }

    pub fn put_back(&self, parked: Vec<Parked>) {
        lock(&self.parked).extend(parked);
    }

    /// A new operation's identity: `id`, until renamed.
    pub fn identity(&self, id: usize) -> Arc<AtomicUsize> {
        let cell = Arc::new(AtomicUsize::new(id));
        lock(&self.identities).insert(id, cell.clone());
        cell
    }

    /// `from`'s operation goes on as `to`: its parked requests and the ones
    /// it sends next.
    pub fn rename(&self, from: usize, to: usize) {
        if let Some(cell) = lock(&self.identities).remove(&from) {
            cell.store(to, Ordering::SeqCst);
        }
        for parked in lock(&self.parked).iter_mut() {
            if parked.caller == from {
                parked.caller = to;
            }
        }
    }

    pub fn parked_callers(&self) -> Vec<usize> {
        lock(&self.parked).iter().map(|p| p.caller).collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Debug)]
struct WireClient(Wire);

impl HttpClient for WireClient {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(WireConnector(self.0.clone()))
    }
}

#[derive(Debug)]
struct WireConnector(Wire);

impl HttpConnector for WireConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let caller = CALLER
            .try_with(|caller| caller.load(Ordering::SeqCst))
            .unwrap_or(usize::MAX);
        let seq = {
            let mut seqs = lock(&self.0.seqs);
            let next = seqs.entry(caller).or_insert(0);
            *next += 1;
            *next
        };
        let (tx, rx) = oneshot::channel();
        let parked = Parked {
            caller,
            seq,
            method: request.method().to_owned(),
            uri: request.uri().to_owned(),
            headers: request
                .headers()
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            body: request.body().bytes().unwrap_or_default().to_vec(),
            orphan: false,
            answer: tx,
        };
        lock(&self.0.parked).push(parked);
        self.0.bell.notify_one();
        HttpConnectorFuture::new(async move {
            match rx.await {
                Ok(answer) => answer,
                Err(_) => Err(ConnectorError::io("the explorer ended the run".into())),
            }
        })
    }
}
