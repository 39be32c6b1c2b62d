//! The sweep that releases the locks of executions that ended without a
//! `Catch` (ABORTED, TIMED_OUT), against the local server and through the real
//! `release-execution-locks` binary.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{client, counted_store, get_item, invoke, sqs_batch, status_change, unique};
use serde_json::json;
use sfn_lock::cleanup::sweep;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner,
};

async fn hold(store: &DynamoStore, lock: &str, owner: &str) {
    let outcome = store
        .acquire(
            &LockName::new(lock).unwrap(),
            &Owner::new(owner).unwrap(),
            LeaseSeconds::new("leaseSeconds", 600).unwrap(),
            EpochMillis::now(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

async fn owner_of(lock: &str) -> Option<String> {
    let item = get_item(&client().await, lock).await?;
    item.get("owner")
        .and_then(|owner| owner.as_s().ok())
        .cloned()
}

#[tokio::test]
async fn an_aborted_execution_loses_every_lock_it_held_and_nobody_else_does() {
    let (store, _) = counted_store().await;
    let ended = unique("arn:aws:states:us-east-1:123456789012:execution:locked:aborted");
    let bystander = unique("arn:aws:states:us-east-1:123456789012:execution:locked:running");
    let (customer_a, customer_b, theirs) =
        (unique("customer-a"), unique("customer-b"), unique("other"));
    hold(&store, &customer_a, &ended).await;
    hold(&store, &customer_b, &ended).await;
    hold(&store, &theirs, &bystander).await;

    let report = sweep(
        &store,
        &status_change(&ended, "ABORTED"),
        EpochMillis::now(),
    )
    .await
    .unwrap();

    let mut released: Vec<_> = report
        .released
        .iter()
        .map(|lock| lock.lock_name.clone())
        .collect();
    released.sort();
    let mut expected = vec![customer_a.clone(), customer_b.clone()];
    expected.sort();
    assert_eq!(released, expected);
    assert_eq!(owner_of(&customer_a).await, None);
    assert_eq!(owner_of(&customer_b).await, None);
    assert_eq!(owner_of(&theirs).await, Some(bystander));
}

#[tokio::test]
async fn a_timed_out_execution_delivered_through_the_queue_is_released_once() {
    let (store, _) = counted_store().await;
    let ended = unique("arn:aws:states:us-east-1:123456789012:execution:locked:timed-out");
    let lock = unique("timed-out-lock");
    hold(&store, &lock, &ended).await;
    let event = status_change(&ended, "TIMED_OUT");

    // EventBridge delivers at least once: the same event twice in one batch, then again.
    let first = sweep(
        &store,
        &sqs_batch(&[event.clone(), event.clone()]),
        EpochMillis::now(),
    )
    .await
    .unwrap();
    let again = sweep(&store, &sqs_batch(&[event]), EpochMillis::now())
        .await
        .unwrap();

    assert_eq!(first.released.len(), 1);
    assert_eq!(first.released[0].lock_name, lock);
    assert!(again.released.is_empty());
    assert_eq!(again.ignored, 0);
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn an_execution_that_holds_nothing_is_a_no_op() {
    let (store, requests) = counted_store().await;
    let ended = unique("arn:aws:states:us-east-1:123456789012:execution:locked:empty-handed");

    let report = sweep(&store, &status_change(&ended, "FAILED"), EpochMillis::now())
        .await
        .unwrap();

    assert!(report.released.is_empty());
    assert_eq!(requests.take(), 1, "one index query, no writes");
}

#[tokio::test]
async fn an_acquire_that_lands_after_the_execution_ended_is_swept_by_the_delayed_sweep() {
    // The race that one-shot cleanups lose: the execution is stopped while its
    // acquire is in flight, and the lock write lands after the end event. The
    // sweep runs CleanupDelaySeconds after the event (longer than the acquire
    // function's timeout), so by then the late write has landed and is found.
    let (store, _) = counted_store().await;
    let ended = unique("arn:aws:states:us-east-1:123456789012:execution:locked:late");
    let lock = unique("late-acquire");
    let event = status_change(&ended, "ABORTED");

    hold(&store, &lock, &ended).await; // the in-flight acquire lands after the ABORTED event
    let report = sweep(&store, &sqs_batch(&[event]), EpochMillis::now())
        .await
        .unwrap();

    assert_eq!(report.released.len(), 1);
    assert_eq!(owner_of(&lock).await, None);
    // The next execution gets the lock at once, with a higher fencing token.
    let next = Owner::new(unique(
        "arn:aws:states:us-east-1:123456789012:execution:locked:next",
    ))
    .unwrap();
    let outcome = store
        .acquire(
            &LockName::new(&lock).unwrap(),
            &next,
            LeaseSeconds::new("leaseSeconds", 60).unwrap(),
            EpochMillis::now(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

#[tokio::test]
async fn events_of_other_shapes_are_ignored_not_failed() {
    let (store, _) = counted_store().await;
    let running = unique("arn:aws:states:us-east-1:123456789012:execution:locked:still-running");
    let lock = unique("still-running");
    hold(&store, &lock, &running).await;
    let mut wrong_source = status_change(&running, "ABORTED");
    wrong_source["source"] = json!("aws.batch");

    let events = [
        status_change(&running, "RUNNING"),
        status_change(&running, "PENDING_REDRIVE"),
        wrong_source,
        json!({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}),
        json!("not an object"),
    ];
    let report = sweep(&store, &sqs_batch(&events), EpochMillis::now())
        .await
        .unwrap();

    assert!(report.released.is_empty());
    assert_eq!(report.ignored, events.len());
    assert_eq!(owner_of(&lock).await, Some(running));
}

#[test]
fn the_real_binary_releases_an_aborted_executions_locks() {
    let ended = unique("arn:aws:states:us-east-1:123456789012:execution:locked:binary");
    let lock = unique("binary-sweep");
    invoke(
        "acquire-lock",
        json!({"lockName": lock, "owner": ended}).to_string(),
    )
    .ok();

    let report = invoke(
        "release-execution-locks",
        sqs_batch(&[status_change(&ended, "ABORTED")]).to_string(),
    )
    .ok();

    assert_eq!(
        report["released"],
        json!([{"lockName": lock, "owner": ended}])
    );
    assert_eq!(report["ignored"], 0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let item = runtime
        .block_on(async { get_item(&client().await, &lock).await })
        .unwrap();
    assert!(!item.contains_key("owner"));
    assert!(matches!(
        item.get("fencingToken"),
        Some(AttributeValue::N(_))
    ));
}
