//! Shared set-up for the integration tests: the local stack started by
//! `scripts/local-stack.sh` (run them with `make test`).
#![allow(dead_code)] // two test binaries use different parts of this module

pub mod log_capture;
pub mod lossy_proxy;

pub mod sfn;

pub mod fault_proxy;

pub mod ssm;

pub mod stores;

pub mod tokens;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use serde_json::Value;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::DynamoStore;

pub fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests need the local stack. Run `make test`, or \
             `scripts/local-stack.sh cargo test` after `make tools`."
        )
    })
}

pub fn table_name() -> String {
    required_env("SFN_LOCK_TABLE")
}

/// Counts every HTTP request the SDK sends, retries included: the wire, not intent.
#[derive(Debug, Default, Clone)]
pub struct RequestCounter(Arc<AtomicUsize>);

impl RequestCounter {
    /// Requests sent since the last call.
    pub fn take(&self) -> usize {
        self.0.swap(0, Ordering::SeqCst)
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An endpoint that accepts every connection and closes it unanswered: a store
/// that cannot be reached. It stays bound for the test's life (a port merely
/// freed could be taken by another process and answer).
pub async fn closing_endpoint() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        while let Ok((connection, _)) = listener.accept().await {
            drop(connection);
        }
    });
    format!("http://{address}")
}

/// An endpoint that accepts every connection and never answers: a store that
/// hangs, which only a time bound ends.
pub async fn silent_endpoint() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    format!("http://{address}")
}

pub async fn client() -> Client {
    required_env("AWS_ENDPOINT_URL_DYNAMODB");
    Client::new(&sdk_config().await)
}

pub async fn counted_store() -> (DynamoStore, RequestCounter) {
    required_env("AWS_ENDPOINT_URL_DYNAMODB");
    let counter = RequestCounter::default();
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .interceptor(counter.clone())
        .build();
    (
        DynamoStore::new(Client::from_conf(config), table_name()),
        counter,
    )
}

/// A lock name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

pub async fn get_item(
    client: &Client,
    lock_name: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name(table_name())
        .key("lockName", AttributeValue::S(lock_name.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem on the local table")
        .item
}

/// Every item of the table by lock name, each rendered with its fields sorted.
pub async fn table_snapshot(client: &Client) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table_name())
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await
            .expect("Scan of the local table");
        for item in page.items() {
            let name = format!("{:?}", item.get("lockName"));
            let mut fields: Vec<String> = item.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            fields.sort();
            rows.insert(name, fields.join(","));
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    rows
}

/// Whether `name` (as rendered by [`table_snapshot`]) came from [`unique`]:
/// another test's lock, which that test may write at any time.
pub fn is_unique_name(rendered: &str) -> bool {
    let name = rendered
        .strip_prefix("Some(S(\"")
        .and_then(|rest| rest.strip_suffix("\"))"))
        .unwrap_or(rendered);
    let mut parts = name.rsplit('-');
    (0..3).all(|_| {
        parts
            .next()
            .is_some_and(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The lock names whose items differ between two snapshots, added or removed
/// included, leaving out the other tests' [`unique`] locks and the marker
/// items (`\u{1}permit\u{1}<hash>`, waiters, owners): their keys are hashes,
/// so whose they are cannot be told, and another test's semaphore writes them
/// at any time. A write on a lock writes its lock item, which is compared.
pub fn changed_outside_other_tests(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let marker = |name: &str| name.starts_with("Some(S(\"\\u{1}");
    names
        .into_iter()
        .filter(|name| before.get(*name) != after.get(*name))
        .filter(|name| !is_unique_name(name) && !marker(name))
        .cloned()
        .collect()
}

/// What a Lambda invocation of a real binary returned.
#[derive(Debug)]
pub enum Invocation {
    Ok(Value),
    /// `errorType` and the parsed JSON `errorMessage`.
    FunctionError(String, Value),
}

impl Invocation {
    pub fn ok(self) -> Value {
        match self {
            Invocation::Ok(value) => value,
            other => panic!("expected success, got {other:?}"),
        }
    }

    pub fn error(self) -> (String, Value) {
        match self {
            Invocation::FunctionError(error_type, message) => (error_type, message),
            other => panic!("expected a function error, got {other:?}"),
        }
    }
}

/// Invokes a real binary through `cargo lambda watch`'s Invoke API. It answers a
/// function error with HTTP 500 and `{errorType, errorMessage}`.
pub fn invoke(function: &str, body: impl AsRef<[u8]>) -> Invocation {
    let url = format!(
        "{}/2015-03-31/functions/{function}/invocations",
        required_env("SFN_LOCK_LAMBDA_URL")
    );
    match ureq::post(&url).send_bytes(body.as_ref()) {
        Ok(response) => Invocation::Ok(response.into_json().expect("JSON result")),
        Err(ureq::Error::Status(500, response)) => {
            let error: Value = response.into_json().expect("JSON error body");
            let error_type = error["errorType"].as_str().expect("errorType").to_owned();
            let message = error["errorMessage"].as_str().expect("errorMessage");
            let message = serde_json::from_str(message).expect("errorMessage is JSON");
            Invocation::FunctionError(error_type, message)
        }
        Err(other) => panic!("invoking {function} failed: {other}"),
    }
}

/// An EventBridge "Step Functions Execution Status Change" event, as AWS sends it.
pub fn status_change(execution_arn: &str, status: &str) -> Value {
    serde_json::json!({
        "version": "0",
        "id": "315c1398-40ff-a850-213b-158f73e60175",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": "123456789012",
        "time": "2026-11-30T10:00:00Z",
        "region": "us-east-1",
        "resources": [execution_arn],
        "detail": {
            "executionArn": execution_arn,
            "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:locked-workflow",
            "name": "run",
            "status": status,
            "startDate": 1_796_032_800_000_i64,
            "stopDate": 1_796_032_900_000_i64,
            "input": "{}",
            "output": null
        }
    })
}

/// The same events as the delay queue hands them to the function.
pub fn sqs_batch(events: &[Value]) -> Value {
    let records: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(i, event)| {
            serde_json::json!({
                "messageId": format!("message-{i}"),
                "receiptHandle": "handle",
                "body": event.to_string(),
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:sfn-lock-cleanup",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    serde_json::json!({ "Records": records })
}
