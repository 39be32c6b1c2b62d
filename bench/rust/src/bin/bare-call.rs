//! The physical floor under a warm invoke: the lock's conditional UpdateItem
//! sent with the Rust SDK from a warm process, with the very client the
//! functions build (`sfn_lock::lambda::dynamodb_client`), and nothing else.
//!
//!   bare-call TABLE    then, on stdin, one request per line:
//!     grant NAME     the grant's UpdateItem (expressions as in crates/sfn-lock/src/dynamodb.rs)
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
// functions send.
use sfn_lock::dynamodb::{GRANT, GRANT_CONDITION, RELEASE, RELEASE_CONDITION};
const OWNER: &str = "arn:aws:states:us-east-1:123456789012:execution:bench:owner-a";
const TTL_GRACE_SECONDS: i64 = 86_400;

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let table = std::env::args().nth(1).expect("usage: bare-call TABLE");
    let client = sfn_lock::lambda::dynamodb_client().await;
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
        let request = client
            .update_item()
            .table_name(&table)
            .key("lockName", AttributeValue::S(lock_name.to_owned()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#acquiredAt", "acquiredAt")
            .expression_attribute_names("#expiresAt", "expiresAt")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":owner", AttributeValue::S(OWNER.to_owned()));
        let started = Instant::now();
        match mode {
            "grant" => {
                request
                    .update_expression(GRANT)
                    .condition_expression(GRANT_CONDITION)
                    .expression_attribute_names("#fencingToken", "fencingToken")
                    .expression_attribute_names("#holderCount", "holderCount")
                    .expression_attribute_names("#queueLength", "queueLength")
                    .expression_attribute_values(":now", n(now))
                    .expression_attribute_values(":acquiredAt", n(now))
                    .expression_attribute_values(":zero", n(0))
                    .expression_attribute_values(":expiresAt", n(expires_at))
                    .expression_attribute_values(":ttl", n(expires_at / 1000 + TTL_GRACE_SECONDS))
                    .expression_attribute_values(":tokenBase", n(now.saturating_mul(1000)))
                    .expression_attribute_values(":one", n(1))
                    .send()
                    .await
                    .expect("a fresh lock name is always granted");
            }
            "release" => {
                request
                    .update_expression(RELEASE)
                    .condition_expression(RELEASE_CONDITION)
                    .expression_attribute_names("#releasedBy", "releasedBy")
                    .expression_attribute_names("#releasedToken", "releasedToken")
                    .expression_attribute_names("#fencingToken", "fencingToken")
                    .expression_attribute_names("#releaseId", "releaseId")
                    .expression_attribute_values(":ttl", n(now / 1000 + TTL_GRACE_SECONDS))
                    .expression_attribute_values(
                        ":releaseId",
                        AttributeValue::S(format!("bare-{now}")),
                    )
                    .send()
                    .await
                    .expect("the bench holds this lock");
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
