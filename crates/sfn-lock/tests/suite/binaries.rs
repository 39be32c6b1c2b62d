//! The real `acquire-lock` and `release-lock` binaries, invoked over the Lambda
//! Runtime API (`cargo lambda watch`), asserting the exact `errorType` strings
//! that ASL `Retry`/`Catch` match on.

use crate::common;

use common::{invoke, unique};
use serde_json::json;

fn event(lock: &str, owner: &str) -> String {
    json!({"lockName": lock, "owner": owner, "leaseSeconds": 120}).to_string()
}

#[test]
fn a_second_owner_gets_lock_unavailable_naming_the_holder() {
    let lock = unique("bin-contended");
    let granted = invoke("acquire-lock", event(&lock, "arn:exec:first")).ok();
    assert_eq!(granted["outcome"], "granted");
    assert_eq!(granted["leaseSeconds"], 120);

    let (error_type, cause) = invoke("acquire-lock", event(&lock, "arn:exec:second")).error();

    assert_eq!(error_type, "LockUnavailable");
    assert_eq!(cause["holder"], "arn:exec:first");
    assert_eq!(cause["lockName"], lock.as_str());
    assert_eq!(cause["expiresAt"], granted["expiresAt"]);
}

#[test]
fn a_retried_acquire_renews_with_the_same_fencing_token() {
    let lock = unique("bin-renew");
    let first = invoke("acquire-lock", event(&lock, "arn:exec:retried")).ok();
    let again = invoke("acquire-lock", event(&lock, "arn:exec:retried")).ok();

    assert_eq!(again["outcome"], "renewed");
    assert_eq!(again["fencingToken"], first["fencingToken"]);
    assert!(first["fencingToken"]
        .as_u64()
        .is_some_and(|token| token > 0));
}

#[test]
fn release_by_a_non_owner_leaves_the_lock_and_is_not_an_error() {
    let lock = unique("bin-not-owner");
    let held = invoke("acquire-lock", event(&lock, "arn:exec:holder")).ok();

    let foreign = invoke(
        "release-lock",
        json!({"lockName": lock, "owner": "arn:exec:intruder"}).to_string(),
    )
    .ok();
    assert_eq!(foreign["outcome"], "held_by_other");
    assert_eq!(foreign["released"], false);

    // Still held by the holder: a third party is refused.
    let (error_type, _) = invoke("acquire-lock", event(&lock, "arn:exec:third")).error();
    assert_eq!(error_type, "LockUnavailable");

    // The holder passes acquire's whole output straight to release, as the ASL does.
    let released = invoke("release-lock", held.to_string()).ok();
    assert_eq!(released["outcome"], "released");
    assert_eq!(released["released"], true);
    let twice = invoke("release-lock", held.to_string()).ok();
    assert_eq!(twice["outcome"], "not_held");
}

#[test]
fn a_wait_bound_that_ran_out_gives_lock_wait_timeout() {
    let lock = unique("bin-wait");
    invoke("acquire-lock", event(&lock, "arn:exec:holder")).ok();

    let waiting = json!({
        "lockName": lock, "owner": "arn:exec:waiter",
        "waitStartedAt": "2020-01-01T00:00:00Z", "maxWaitSeconds": 60,
    });
    let (error_type, cause) = invoke("acquire-lock", waiting.to_string()).error();

    assert_eq!(error_type, "LockWaitTimeout");
    assert_eq!(cause["holder"], "arn:exec:holder");
    assert_eq!(cause["maxWaitSeconds"], 60);
}

#[test]
fn bad_input_is_invalid_lock_request_naming_the_field() {
    let (error_type, cause) = invoke(
        "acquire-lock",
        r#"{"lockName": "x", "owner": "y", "lease_seconds": 60}"#,
    )
    .error();
    assert_eq!(error_type, "InvalidLockRequest");
    assert_eq!(cause["field"], "lease_seconds");
    let (error_type, cause) = invoke("release-lock", r#"{"lockName": ""}"#).error();
    assert_eq!(error_type, "InvalidLockRequest");
    assert_eq!(cause["field"], "lockName");
}
