//! The local Step Functions endpoint's task tokens (tests/support/sfn_endpoint.py):
//! mint one as a `.waitForTaskToken` task would, and see what became of it.

use std::sync::Arc;

use serde_json::{json, Value};
use sfn_lock::aws::config::{sdk_config, waker_client};
use sfn_lock::{DynamoStore, SfnWaker, TaskToken};

use super::{client, table_name};

fn endpoint() -> String {
    std::env::var("SFN_LOCK_SFN_ENDPOINT")
        .expect("SFN_LOCK_SFN_ENDPOINT is not set: run under scripts/local-stack.sh")
}

fn post(route: &str, body: Value) -> Value {
    ureq::post(&format!("{}/_local/{route}", endpoint()))
        .send_json(body)
        .unwrap_or_else(|error| panic!("POST /_local/{route}: {error}"))
        .into_json()
        .expect("a JSON answer")
}

/// A new open task's token, as `$$.Task.Token` would give it.
pub fn mint(execution: &str) -> TaskToken {
    let answer = post(
        "tokens",
        json!({"execution": execution, "state": "Acquire Lock"}),
    );
    TaskToken::new(answer["taskToken"].as_str().expect("taskToken")).expect("a valid token")
}

fn escaped(token: &TaskToken) -> String {
    token
        .as_str()
        .replace('%', "%25")
        .replace('/', "%2F")
        .replace('+', "%2B")
        .replace('=', "%3D")
}

/// The task's state now: `OPEN`, `SUCCEEDED` (with `output`), `FAILED`, ...
pub fn outcome(token: &TaskToken) -> Value {
    let url = format!("{}/_local/tokens/{}/outcome", endpoint(), escaped(token));
    ureq::get(&url)
        .call()
        .expect("GET outcome")
        .into_json()
        .expect("a JSON answer")
}

/// The task's state once it is no longer open, or after `seconds` if it stays open.
pub fn await_outcome(token: &TaskToken, seconds: u32) -> Value {
    let url = format!(
        "{}/_local/tokens/{}/outcome?waitSeconds={seconds}",
        endpoint(),
        escaped(token)
    );
    ureq::get(&url)
        .call()
        .expect("GET outcome")
        .into_json()
        .expect("a JSON answer")
}

/// The output the task was completed with; panics if it is still open.
pub fn woken_with(token: &TaskToken) -> Value {
    let outcome = outcome(token);
    assert_eq!(outcome["status"], "SUCCEEDED", "{outcome}");
    let output = outcome["output"].as_str().expect("output");
    serde_json::from_str(output).expect("JSON output")
}

pub fn is_open(token: &TaskToken) -> bool {
    outcome(token)["status"] == "OPEN"
}

/// Ends the task as a timeout or a stopped execution would.
pub fn close(token: &TaskToken, reason: &str) {
    post(
        &format!("tokens/{}/close", escaped(token)),
        json!({"reason": reason}),
    );
}

/// The next `count` SendTaskSuccess calls for `execution`'s tokens fail with
/// HTTP 500 and complete nothing.
pub fn fail_next_wakes(execution: &str, count: usize) {
    post(
        "faults",
        json!({"action": "SendTaskSuccess", "count": count, "status": 500, "execution": execution}),
    );
}

/// The next `count` SendTaskSuccess calls for `execution`'s tokens are
/// throttled (`ThrottlingException`: not processed, and said so).
pub fn throttle_next_wakes(execution: &str, count: usize) {
    post(
        "faults",
        json!({"action": "SendTaskSuccess", "count": count, "status": "throttle", "execution": execution}),
    );
}

/// A store that wakes waiters through the local endpoint, as the functions do.
pub async fn queued_store() -> DynamoStore {
    let waker = SfnWaker::new(waker_client(&sdk_config().await));
    DynamoStore::new(client().await, table_name()).with_waker(Arc::new(waker))
}

/// Review helper: the next SendTaskSuccess for `execution` completes the task
/// but its answer is lost (HTTP 500).
#[allow(dead_code)]
pub fn lose_next_wake_answer(execution: &str) {
    post(
        "faults",
        json!({"action": "SendTaskSuccess", "count": 1, "status": "lose_answer", "execution": execution}),
    );
}
