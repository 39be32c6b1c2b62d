//! The wait bound, decided by `Locker::acquire` itself: a contended acquire
//! answers `LockUnavailable` (retried by the ASL) until `waitStartedAt +
//! maxWaitSeconds`, then `LockWaitTimeout` (never retried). In process, on the
//! real local store, with the clock passed in.

mod common;

use common::{client, table_name, unique};
use serde_json::json;
use sfn_lock::{DynamoStore, EpochMillis, LeaseSeconds, LockError, Locker};

const STARTED_AT: &str = "2026-11-30T10:00:00Z";

async fn held_lock() -> (Locker<DynamoStore>, String, EpochMillis) {
    let locker = Locker::new(
        DynamoStore::new(client().await, table_name()),
        LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
    );
    let lock = unique("wait-bound");
    let started = EpochMillis::parse_rfc3339(STARTED_AT).unwrap();
    locker
        .acquire(
            &json!({"lockName": lock, "owner": "arn:exec:holder"}),
            started,
        )
        .await
        .unwrap();
    (locker, lock, started)
}

fn waiter(lock: &str) -> serde_json::Value {
    json!({"lockName": lock, "owner": "arn:exec:waiter",
           "waitStartedAt": STARTED_AT, "maxWaitSeconds": 60})
}

#[tokio::test]
async fn a_waiter_inside_its_bound_is_told_to_retry() {
    let (locker, lock, started) = held_lock().await;
    let just_inside = EpochMillis(started.0 + 59_999);
    match locker.acquire(&waiter(&lock), just_inside).await {
        Err(LockError::Unavailable { holder, .. }) => assert_eq!(holder, "arn:exec:holder"),
        other => panic!("expected LockUnavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_waiter_at_its_bound_gives_up_naming_the_holder() {
    let (locker, lock, started) = held_lock().await;
    let at_bound = started.plus_seconds(60);
    match locker.acquire(&waiter(&lock), at_bound).await {
        Err(LockError::WaitTimeout {
            holder,
            max_wait_seconds,
            ..
        }) => {
            assert_eq!(holder, "arn:exec:holder");
            assert_eq!(max_wait_seconds, 60);
        }
        other => panic!("expected LockWaitTimeout, got {other:?}"),
    }
}
