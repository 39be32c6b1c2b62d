//! The wait bound, decided by `Locker::acquire` itself: a contended acquire
//! answers `LockUnavailable` (retried by the ASL) until `waitStartedAt +
//! maxWaitSeconds`, then `LockWaitTimeout` (never retried). In process, on the
//! real local store, with the clock passed in.

use crate::common;

use common::lossy_proxy::store_via;
use common::{client, closing_endpoint, table_name, unique};
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

/// The same waiter against a store that cannot be reached.
async fn unreachable_locker() -> Locker<DynamoStore> {
    Locker::new(
        store_via(&closing_endpoint().await).await,
        LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
    )
}

#[tokio::test]
async fn a_store_error_inside_the_wait_bound_is_one_more_reason_to_wait() {
    // Step Functions counts a retrier's attempts across the whole wait
    // (one state), so a bounded store-error retrier would end a long wait
    // after a few scattered hiccups: inside the bound, the wait goes on.
    let locker = unreachable_locker().await;
    let started = EpochMillis::parse_rfc3339(STARTED_AT).unwrap();
    match locker
        .acquire(&waiter("unreachable"), EpochMillis(started.0 + 59_999))
        .await
    {
        Err(LockError::StoreUnavailableWhileWaiting { .. }) => {}
        other => panic!("expected a wait-on error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_store_error_past_the_wait_bound_or_without_one_stays_a_store_error() {
    let locker = unreachable_locker().await;
    let started = EpochMillis::parse_rfc3339(STARTED_AT).unwrap();
    let past = locker
        .acquire(&waiter("unreachable"), started.plus_seconds(60))
        .await;
    assert!(
        matches!(past, Err(LockError::StoreUnavailable { .. })),
        "{past:?}"
    );
    let unbounded = locker
        .acquire(
            &json!({"lockName": "unreachable", "owner": "arn:exec:waiter"}),
            started,
        )
        .await;
    assert!(
        matches!(unbounded, Err(LockError::StoreUnavailable { .. })),
        "{unbounded:?}"
    );
}
