//! Every function ends its store calls inside the invocation's own time
//! (`context.deadline` less an answer margin, vocab/deadline.rs), against a
//! store that accepts and never answers: the answer names the time budget
//! (the SDK's own timeouts would name something else, much later), and the
//! decision is logged once, naming the lock.

use crate::common;

use common::log_capture::Captured;
use common::lossy_proxy::store_via;
use common::sfn::{queue, start, stop, sweeper_on, LOCKED};
use common::{silent_endpoint, sqs_batch, status_change, unique};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use sfn_lock::lambda::{
    handle_acquire, handle_release, handle_sweep, ConfiguredLocker, ConfiguredSweeper, Payload,
    SweepAnswer, SweepFunction,
};
use sfn_lock::metrics::Metrics;
use sfn_lock::{AnyStore, DynamoStore, EpochMillis, LeaseSeconds, Locker};

const BUDGET_CUT: &str = "within the function's time budget";

async fn silent_store() -> DynamoStore {
    store_via(&silent_endpoint().await).await
}

/// An invocation with 800 ms left: 500 ms are kept back to answer in, so
/// the store gets about 300 ms.
fn invocation(payload: Value) -> LambdaEvent<Payload> {
    let mut context = Context::default();
    context.deadline = u64::try_from(EpochMillis::now().0 + 800).unwrap_or(0);
    LambdaEvent::new(Payload::Json(payload), context)
}

async fn silent_locker() -> ConfiguredLocker {
    Ok(Locker::new(
        AnyStore::DynamoDb(silent_store().await),
        LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
    ))
}

/// The log lines that name `lock`, and how many lines there are in all.
fn naming(captured: &Captured, lock: &str) -> (Vec<Value>, usize) {
    let lines = captured.lines();
    let named = lines
        .iter()
        .filter(|line| line["fields"]["lock_name"] == lock)
        .cloned()
        .collect();
    (named, lines.len())
}

#[tokio::test]
async fn an_acquire_cut_inside_its_wait_bound_keeps_waiting_and_says_so_once() {
    // The cut is a store error like any other, decided by the lock's rules.
    let captured = Captured::start();
    let lock = unique("silent-acquire");
    let event = json!({"lockName": lock, "owner": "arn:exec:waiter",
                       "waitStartedAt": EpochMillis::now().to_rfc3339(), "maxWaitSeconds": 600});

    let answer = handle_acquire(&silent_locker().await, invocation(event)).await;

    let diagnostic = answer.expect_err("the silent store cannot grant");
    assert_eq!(diagnostic.error_type, "LockUnavailable", "{diagnostic:?}");
    assert!(
        diagnostic.error_message.contains("storeUnavailable")
            && diagnostic.error_message.contains(BUDGET_CUT),
        "{diagnostic:?}"
    );
    let (named, all) = naming(&captured, &lock);
    assert_eq!((named.len(), all), (1, 1), "{:#?}", captured.lines());
}

#[tokio::test]
async fn a_release_cut_by_the_budget_is_a_store_error_logged_once() {
    let captured = Captured::start();
    let lock = unique("silent-release");
    let event = json!({"lockName": lock, "owner": "arn:exec:holder"});

    let answer = handle_release(&silent_locker().await, invocation(event)).await;

    let diagnostic = answer.expect_err("the silent store cannot release");
    assert_eq!(
        diagnostic.error_type, "LockStoreUnavailable",
        "{diagnostic:?}"
    );
    assert!(
        diagnostic.error_message.contains(BUDGET_CUT),
        "{diagnostic:?}"
    );
    let (named, all) = naming(&captured, &lock);
    assert_eq!((named.len(), all), (1, 1), "{:#?}", captured.lines());
}

async fn silent_sweeper(grace_seconds: u32) -> ConfiguredSweeper {
    let store = AnyStore::DynamoDb(silent_store().await);
    Ok(SweepFunction {
        sweeper: sweeper_on(store, grace_seconds, &queue().await).await,
        metrics: Metrics::off(),
    })
}

#[tokio::test]
async fn a_reconciler_run_whose_listing_is_cut_fails_naming_the_budget() {
    let captured = Captured::start();
    let answer = handle_sweep(
        &silent_sweeper(0).await,
        invocation(json!({"sfnLockReconcile": {}})),
    )
    .await;

    let diagnostic = answer.expect_err("the listing cannot finish");
    assert_eq!(
        diagnostic.error_type, "LockStoreUnavailable",
        "{diagnostic:?}"
    );
    assert!(
        diagnostic.error_message.contains(BUDGET_CUT),
        "{diagnostic:?}"
    );
    // The run's one decision, logged: the runtime's own echo of an error is
    // off (lambda/logging.rs), so a silent failure would leave no line at all.
    let lines = captured.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["fields"]["decision"], "failed", "{lines:#?}");
}

#[tokio::test]
async fn a_swept_record_cut_by_the_budget_is_reported_for_redelivery() {
    // A stopped execution past its grace: the sweep reads the store next.
    let execution = start(LOCKED, &unique("silent-sweep")).await;
    stop(&execution).await;
    let captured = Captured::start();
    let batch = sqs_batch(&[status_change(&execution, "ABORTED")]);

    let answer = handle_sweep(&silent_sweeper(0).await, invocation(batch)).await;

    let Ok(SweepAnswer::Sweep(report)) = answer else {
        panic!("a batch answers its report: {answer:?}");
    };
    assert_eq!(
        serde_json::to_value(&report).unwrap()["batchItemFailures"],
        json!([{"itemIdentifier": "message-0"}])
    );
    let failed: Vec<Value> = captured
        .lines()
        .into_iter()
        .filter(|line| line["fields"]["message_id"] == "message-0")
        .collect();
    assert_eq!(failed.len(), 1, "{:#?}", captured.lines());
    assert!(
        failed[0]["fields"]["error"]
            .as_str()
            .is_some_and(|error| error.contains(BUDGET_CUT)),
        "{failed:#?}"
    );
}
