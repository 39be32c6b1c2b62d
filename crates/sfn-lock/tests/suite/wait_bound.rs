//! The wait bound, decided by `Locker::acquire` itself: a contended acquire
//! answers `LockUnavailable` (retried by the ASL) until `waitStartedAt +
//! maxWaitSeconds`, then `LockWaitTimeout` (never retried). In process, on the
//! real local store, with the clock passed in.

use crate::common;

use common::lossy_proxy::store_via;
use common::{client, closing_endpoint, table_name, unique};
use lambda_runtime::LambdaEvent;
use serde_json::json;
use sfn_lock::lambda::{handle_acquire, ConfiguredLocker, Payload};
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

#[tokio::test]
async fn running_out_of_the_function_s_time_inside_the_bound_keeps_waiting() {
    // A store that accepts and never answers: the invocation's own deadline
    // cuts the call, and that cut is a store error like any other, decided by
    // the lock's rules (the handler used to answer LockStoreUnavailable itself).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let locker: ConfiguredLocker = Ok(Locker::new(
        sfn_lock::AnyStore::DynamoDb(store_via(&silent).await),
        LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
    ));
    let now = EpochMillis::now();
    let mut context = lambda_runtime::Context::default();
    // 500 ms of it are kept back to answer in: the store gets about 300 ms.
    context.deadline = u64::try_from(now.0 + 800).unwrap();
    let event = json!({"lockName": "silent", "owner": "arn:exec:waiter",
                       "waitStartedAt": now.to_rfc3339(), "maxWaitSeconds": 600});

    let answer = handle_acquire(&locker, LambdaEvent::new(Payload::Json(event), context)).await;

    let diagnostic = answer.expect_err("the silent store cannot grant");
    assert_eq!(diagnostic.error_type, "LockUnavailable", "{diagnostic:?}");
    assert!(
        diagnostic.error_message.contains("storeUnavailable"),
        "{diagnostic:?}"
    );
}
