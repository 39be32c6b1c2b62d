//! Bad events through the real binaries: each one is refused with
//! `InvalidLockRequest` and the table is byte-for-byte what it was.
//!
//! Other tests may write to the table meanwhile (test runners that run test
//! binaries side by side do): their locks have [`common::unique`] names, which
//! no bad event uses, so the comparison leaves exactly those out.

use crate::common;

use common::{
    changed_outside_other_tests, client, invoke, is_unique_name, sqs_batch, status_change,
    table_snapshot,
};
use serde_json::json;

const LONG_NAME_BYTES: usize = 1025;

/// The field each refusal must name (the caller's message points at it).
fn expected_field(case: &str) -> &'static str {
    match case {
        "missing owner"
        | "owner an array"
        | "owner a boolean"
        | "empty owner"
        | "oversized owner"
        | "NUL in owner"
        | "release: missing owner"
        | "release: owner a number" => "owner",
        "empty object"
        | "missing lockName"
        | "null lockName"
        | "lockName a number"
        | "lockName an object"
        | "empty lockName"
        | "oversized lockName"
        | "control character in lockName"
        | "escaped C1 control character"
        | "a 1 MiB lockName"
        | "release: empty object"
        | "release: oversized lockName" => "lockName",
        "zero lease" | "negative lease" | "lease over a year" | "lease beyond i64"
        | "fractional lease" | "lease as a string" => "leaseSeconds",
        "typo in a field name" => "lease_seconds",
        "unknown field" => "force",
        "release: unknown field" => "everyone",
        "wait bound without start" | "wait start not a timestamp" => "waitStartedAt",
        "wait start without bound" | "negative wait bound" => "maxWaitSeconds",
        "limit zero" | "limit over a thousand" | "fractional limit" | "limit as a string" => {
            "limit"
        }
        "semaphore owner too long for the item" | "queued semaphore owner too long" => "owner",
        "empty task token"
        | "task token over 2048 bytes"
        | "task token with a newline"
        | "task token as a number" => "taskToken",
        "JSON array"
        | "JSON string"
        | "JSON number"
        | "JSON null"
        | "lone surrogate escape"
        | "reversed surrogate pair"
        | "number beyond f64"
        | "truncated JSON"
        | "release: JSON array" => "event",
        other => panic!("no expected field for the case {other:?}: add it here"),
    }
}

fn bad_acquire_events() -> Vec<(&'static str, String)> {
    let long_name = "n".repeat(LONG_NAME_BYTES);
    let long_owner = "o".repeat(2049);
    vec![
        ("empty object", "{}".into()),
        ("missing owner", r#"{"lockName": "etl"}"#.into()),
        ("missing lockName", r#"{"owner": "arn:exec:1"}"#.into()),
        ("null lockName", r#"{"lockName": null, "owner": "arn:exec:1"}"#.into()),
        ("lockName a number", r#"{"lockName": 42, "owner": "arn:exec:1"}"#.into()),
        ("lockName an object", r#"{"lockName": {"S": "etl"}, "owner": "arn:exec:1"}"#.into()),
        ("owner an array", r#"{"lockName": "etl", "owner": ["arn"]}"#.into()),
        ("owner a boolean", r#"{"lockName": "etl", "owner": true}"#.into()),
        ("empty lockName", r#"{"lockName": "", "owner": "arn:exec:1"}"#.into()),
        ("empty owner", r#"{"lockName": "etl", "owner": ""}"#.into()),
        ("oversized lockName", format!(r#"{{"lockName": "{long_name}", "owner": "arn:exec:1"}}"#)),
        ("oversized owner", format!(r#"{{"lockName": "etl", "owner": "{long_owner}"}}"#)),
        ("control character in lockName", r#"{"lockName": "etl\n", "owner": "arn:exec:1"}"#.into()),
        ("NUL in owner", r#"{"lockName": "etl", "owner": "arn\u0000"}"#.into()),
        ("zero lease", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": 0}"#.into()),
        ("negative lease", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": -60}"#.into()),
        ("lease over a year", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": 31536001}"#.into()),
        ("lease beyond i64", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": 99999999999999999999999}"#.into()),
        ("fractional lease", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": 1.5}"#.into()),
        ("lease as a string", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": "60"}"#.into()),
        ("typo in a field name", r#"{"lockName": "etl", "owner": "arn:exec:1", "lease_seconds": 60}"#.into()),
        ("unknown field", r#"{"lockName": "etl", "owner": "arn:exec:1", "force": true}"#.into()),
        ("wait bound without start", r#"{"lockName": "etl", "owner": "arn:exec:1", "maxWaitSeconds": 60}"#.into()),
        ("wait start without bound", r#"{"lockName": "etl", "owner": "arn:exec:1", "waitStartedAt": "2026-01-01T00:00:00Z"}"#.into()),
        ("wait start not a timestamp", r#"{"lockName": "etl", "owner": "arn:exec:1", "waitStartedAt": "tomorrow", "maxWaitSeconds": 5}"#.into()),
        ("negative wait bound", r#"{"lockName": "etl", "owner": "arn:exec:1", "waitStartedAt": "2026-01-01T00:00:00Z", "maxWaitSeconds": -1}"#.into()),
        ("JSON array", "[]".into()),
        ("JSON string", r#""nightly-etl""#.into()),
        ("JSON number", "42".into()),
        ("JSON null", "null".into()),
        ("lone surrogate escape", r#"{"lockName": "\ud800", "owner": "arn:exec:1"}"#.into()),
        ("reversed surrogate pair", r#"{"lockName": "\udc00\ud800", "owner": "arn:exec:1"}"#.into()),
        ("escaped C1 control character", r#"{"lockName": "etl\u0085", "owner": "arn:exec:1"}"#.into()),
        ("number beyond f64", r#"{"lockName": "etl", "owner": "arn:exec:1", "leaseSeconds": 1e400}"#.into()),
        ("truncated JSON", r#"{"lockName": "etl", "owner": "#.into()),
        ("a 1 MiB lockName", format!(r#"{{"lockName": "{}", "owner": "arn:exec:1"}}"#, "x".repeat(1 << 20))),
        ("limit zero", r#"{"lockName": "etl", "owner": "arn:exec:1", "limit": 0}"#.into()),
        ("limit over a thousand", r#"{"lockName": "etl", "owner": "arn:exec:1", "limit": 1001}"#.into()),
        ("fractional limit", r#"{"lockName": "etl", "owner": "arn:exec:1", "limit": 2.5}"#.into()),
        ("limit as a string", r#"{"lockName": "etl", "owner": "arn:exec:1", "limit": "3"}"#.into()),
        // Refused by the store before it writes (the marker included).
        ("semaphore owner too long for the item", format!(r#"{{"lockName": "etl", "owner": "{}", "limit": 2}}"#, "x".repeat(257))),
        ("empty task token", r#"{"lockName": "etl", "owner": "arn:exec:1", "taskToken": ""}"#.into()),
        ("task token over 2048 bytes", format!(r#"{{"lockName": "etl", "owner": "arn:exec:1", "taskToken": "{}"}}"#, "t".repeat(2049))),
        ("task token with a newline", r#"{"lockName": "etl", "owner": "arn:exec:1", "taskToken": "AQ\u000aCE"}"#.into()),
        ("task token as a number", r#"{"lockName": "etl", "owner": "arn:exec:1", "taskToken": 42}"#.into()),
        ("queued semaphore owner too long", format!(r#"{{"lockName": "etl", "owner": "{}", "limit": 2, "taskToken": "AQCE"}}"#, "x".repeat(257))),
    ]
}

/// The cleanup function answers what is not an ended execution with a logged
/// ignore, never an error: SQS would otherwise redeliver it forever.
/// The owner the cleanup events name: it holds the witness lock, so an event
/// the sweep wrongly acted on would show as a change in the table.
const WITNESS_OWNER: &str =
    "arn:aws:states:us-east-1:123456789012:execution:locked:bad-input-witness";

fn ignored_cleanup_events() -> Vec<(&'static str, Vec<u8>)> {
    let arn = WITNESS_OWNER;
    let mut wrong_type = status_change(arn, "ABORTED");
    wrong_type["detail-type"] = json!("EC2 Instance State-change Notification");
    let mut arn_a_number = status_change(arn, "ABORTED");
    arn_a_number["detail"]["executionArn"] = json!(12345);
    let mut arn_empty = status_change(arn, "ABORTED");
    arn_empty["detail"]["executionArn"] = json!("");
    let mut no_detail = status_change(arn, "ABORTED");
    no_detail.as_object_mut().unwrap().remove("detail");
    let still_running = status_change(arn, "RUNNING");
    [
        ("cleanup: empty object", json!({})),
        ("cleanup: wrong detail-type", wrong_type),
        ("cleanup: executionArn a number", arn_a_number),
        ("cleanup: empty executionArn", arn_empty),
        ("cleanup: no detail", no_detail),
        ("cleanup: a running execution", still_running.clone()),
        (
            "cleanup: SQS record with a non-JSON body",
            json!({"Records": [{"messageId": "1", "body": "not json"}]}),
        ),
        (
            "cleanup: Records not a list",
            json!({"Records": "everything"}),
        ),
        (
            "cleanup: SQS batch of a running execution",
            sqs_batch(&[still_running]),
        ),
        ("cleanup: JSON array", json!([1, 2, 3])),
    ]
    .into_iter()
    .map(|(name, event)| (name, event.to_string().into_bytes()))
    .chain([
        ("cleanup: truncated JSON", br#"{"detail-type": "#.to_vec()),
        (
            "cleanup: invalid UTF-8",
            b"{\"source\": \"aws.states\xff\"}".to_vec(),
        ),
        (
            "cleanup: number beyond f64",
            br#"{"detail": {"executionArn": 1e999}}"#.to_vec(),
        ),
    ])
    .collect()
}

fn bad_release_events() -> Vec<(&'static str, String)> {
    vec![
        ("release: empty object", "{}".into()),
        ("release: missing owner", r#"{"lockName": "etl"}"#.into()),
        (
            "release: owner a number",
            r#"{"lockName": "etl", "owner": 7}"#.into(),
        ),
        (
            "release: oversized lockName",
            format!(
                r#"{{"lockName": "{}", "owner": "arn:exec:1"}}"#,
                "n".repeat(LONG_NAME_BYTES)
            ),
        ),
        (
            "release: unknown field",
            r#"{"lockName": "etl", "owner": "arn:exec:1", "everyone": true}"#.into(),
        ),
        (
            "release: JSON array",
            r#"[{"lockName": "etl", "owner": "arn:exec:1"}]"#.into(),
        ),
    ]
}

#[tokio::test]
async fn every_bad_event_is_refused_and_changes_nothing() {
    let client = client().await;
    // Something in the table, so "unchanged" is not trivially "still empty".
    invoke(
        "acquire-lock",
        json!({"lockName": "bad-input-witness", "owner": WITNESS_OWNER}).to_string(),
    );
    let before = table_snapshot(&client).await;
    assert!(!before.is_empty());

    let cases: Vec<_> = bad_acquire_events()
        .into_iter()
        .map(|(name, body)| ("acquire-lock", name, body))
        .chain(
            bad_release_events()
                .into_iter()
                .map(|(name, body)| ("release-lock", name, body)),
        )
        .collect();
    let ignored = ignored_cleanup_events();
    assert!(cases.len() + ignored.len() >= 40);
    for (function, name, body) in cases {
        let (error_type, cause) = invoke(function, &body).error();
        assert_eq!(error_type, "InvalidLockRequest", "{function}: {name}");
        assert_eq!(
            cause["field"],
            expected_field(name),
            "{function}: {name}: the cause names the field: {cause}"
        );
        assert!(
            cause["rule"].is_string(),
            "{function}: {name}: the cause states the rule: {cause}"
        );
    }
    for (name, body) in ignored {
        let report = invoke("release-execution-locks", &body).ok();
        assert_eq!(report["released"], json!([]), "{name}");
        assert!(
            report["ignored"]
                .as_u64()
                .is_some_and(|ignored| ignored >= 1),
            "{name}: {report}"
        );
    }

    assert_eq!(
        changed_outside_other_tests(&before, &table_snapshot(&client).await),
        Vec::<String>::new(),
        "a refused event must not write"
    );
}

#[test]
fn other_tests_lock_names_are_told_apart_from_bad_events() {
    let rendered = |name: &str| {
        format!(
            "{:?}",
            Some(aws_sdk_dynamodb::types::AttributeValue::S(name.into()))
        )
    };
    assert!(is_unique_name(&rendered(&common::unique("renew-race"))));
    for name in [
        "etl",
        "bad-input-witness",
        "a-1-2",
        "x--1-2",
        "held-0-12a-3-4",
    ] {
        assert!(!is_unique_name(&rendered(name)), "{name}");
    }
}
