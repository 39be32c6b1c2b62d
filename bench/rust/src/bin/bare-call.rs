//! The physical floor under a warm invoke: the lock's conditional UpdateItem
//! sent with the Rust SDK from a warm process, with the very client the
//! functions build (`sfn_lock::aws::config::dynamodb_client`), and nothing else.
//!
//!   bare-call TABLE    then, on stdin, one request per line:
//!     grant NAME     the grant's UpdateItem (expressions as in crates/sfn-lock/src/store/dynamodb/grant.rs)
//!     release NAME   the release's UpdateItem
//!     locker NAME    the whole lock library in-process (event validation, the
//!                    grant, the answer) without the Lambda runtime
//!   and answers each with one line: the call's wall time in milliseconds.
//!
//! Driven a line at a time, the bench can interleave these calls with the
//! function's invokes and compare them pairwise under the same momentary load.

use std::io::{BufRead, Write};
use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use sfn_lock::{DynamoStore, EpochMillis, LeaseSeconds, Locker};

// The library's own expressions, so that the floor cannot drift from what the
// functions send; the attribute names and values are derived from them too.
use sfn_lock::store::dynamodb::{GRANT, GRANT_CONDITION, RELEASE, RELEASE_CONDITION, TTL_GRACE_SECONDS};
const OWNER: &str = "arn:aws:states:us-east-1:123456789012:execution:bench:owner-a";

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The `#name` or `:value` placeholders the two expressions use, each once.
/// Every `#name` in the library stands for the attribute `name`, and the
/// library sends exactly the placeholders its expressions use (DynamoDB
/// refuses unused ones), so these are the function's very maps.
fn placeholders(expressions: [&str; 2], sigil: char) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for text in expressions {
        for (at, _) in text.match_indices(sigil) {
            let rest = &text[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let placeholder = format!("{sigil}{}", &rest[..end]);
            if !found.contains(&placeholder) {
                found.push(placeholder);
            }
        }
    }
    found
}

/// Expiry in epoch seconds plus the grace, rounded up: the library's `ttl`.
fn ttl_after(millis: i64) -> i64 {
    (millis + 999) / 1000 + i64::from(TTL_GRACE_SECONDS)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let table = std::env::args().nth(1).expect("usage: bare-call TABLE");
    let client = sfn_lock::aws::config::dynamodb_client().await;
    let locker = Locker::new(
        DynamoStore::new(client.clone(), table.clone()),
        LeaseSeconds::new("leaseSeconds", 900).unwrap(),
    );
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let (mode, lock_name) = line.split_once(' ').expect("MODE NAME");
        let now = EpochMillis::now().0;
        let expires_at = now + 900_000;
        let value = |placeholder: &str| match placeholder {
            ":owner" => AttributeValue::S(OWNER.to_owned()),
            ":now" | ":acquiredAt" => n(now),
            ":expiresAt" => n(expires_at),
            ":ttl" if mode == "grant" => n(ttl_after(expires_at)),
            ":ttl" => n(ttl_after(now)),
            ":tokenBase" => n(now.saturating_mul(1000)),
            ":one" => n(1),
            ":zero" => n(0),
            ":releaseId" => AttributeValue::S(format!("bare-{now}")),
            other => panic!("bare-call does not know {other}: add it as the library sets it"),
        };
        let (update, condition) = match mode {
            "grant" => (GRANT, GRANT_CONDITION),
            "release" => (RELEASE, RELEASE_CONDITION),
            _ => ("", ""),
        };
        let mut request = client
            .update_item()
            .table_name(&table)
            .key("lockName", AttributeValue::S(lock_name.to_owned()))
            .update_expression(update)
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for name in placeholders([update, condition], '#') {
            request = request.expression_attribute_names(&name, &name[1..]);
        }
        for placeholder in placeholders([update, condition], ':') {
            request = request.expression_attribute_values(&placeholder, value(&placeholder));
        }
        let started = Instant::now();
        match mode {
            "grant" => {
                request
                    .send()
                    .await
                    .expect("a fresh lock name is always granted");
            }
            "release" => {
                request.send().await.expect("the bench holds this lock");
            }
            "locker" => {
                let event =
                    serde_json::json!({"lockName": lock_name, "owner": OWNER, "leaseSeconds": 900});
                locker
                    .acquire(&event, EpochMillis::now())
                    .await
                    .expect("a fresh lock name is always granted");
            }
            other => panic!("unknown mode {other}"),
        }
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        let mut out = stdout.lock();
        writeln!(out, "{elapsed}").unwrap();
        out.flush().unwrap();
    }
}
