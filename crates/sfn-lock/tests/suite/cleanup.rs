//! The sweep that releases the locks of executions that ended without a
//! `Catch`, against the local server: DynamoDB, Step Functions and SQS all
//! served by moto. Each test injects `now`, so "how long ago the execution
//! ended" is a value, not a sleep.

use crate::common;

use common::sfn::{
    delayed_messages, hold, hold_at, owner_of, queue, start, stop, sweeper, LOCKED, STRANGER,
};
use common::{client, sqs_batch, status_change, unique};
use serde_json::json;
use sfn_lock::sweep::policy::LATE_ACQUIRE_SECONDS;
use sfn_lock::{DynamoStore, EpochMillis};

const GRACE: u32 = 60;

#[tokio::test]
async fn an_aborted_execution_loses_every_lock_it_held_once_the_grace_has_passed() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("aborted")).await;
    let bystander = start(LOCKED, &unique("running")).await;
    let (customer_a, customer_b, theirs) =
        (unique("customer-a"), unique("customer-b"), unique("other"));
    hold(&sweeper.store, &customer_a, &ended).await;
    hold(&sweeper.store, &customer_b, &ended).await;
    hold(&sweeper.store, &theirs, &bystander).await;
    let stopped_at = stop(&ended).await;
    let event = sqs_batch(&[status_change(&ended, "ABORTED")]);

    // One second before the grace ends, its workload may still run: nothing goes,
    // and the event goes back to the queue to be looked at again.
    let early = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE - 1))
        .await
        .unwrap();
    assert_eq!((early.released.len(), early.deferred), (0, 1));
    assert!(early.batch_item_failures.is_empty());
    assert_eq!(delayed_messages(&queue_url).await, 1);
    assert_eq!(owner_of(&customer_a).await, Some(ended.clone()));

    let report = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    let mut released: Vec<_> = report
        .released
        .iter()
        .map(|l| l.lock_name.clone())
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
async fn a_made_up_end_of_a_running_or_redriven_execution_frees_nothing() {
    // Step Functions says RUNNING: the event is forged, or the execution was
    // redriven after it ended (same ARN) and holds its lock again.
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let running = start(LOCKED, &unique("redriven")).await;
    let lock = unique("redriven-lock");
    hold(&sweeper.store, &lock, &running).await;

    let far_future = EpochMillis::now().plus_seconds(86_400);
    let events = [
        status_change(&running, "ABORTED"),
        status_change(&running, "FAILED"),
    ];
    let report = sweeper
        .sweep(&sqs_batch(&events), far_future)
        .await
        .unwrap();

    assert_eq!(report.skipped, 2, "{report:?}");
    assert!(report.released.is_empty());
    assert_eq!(owner_of(&lock).await, Some(running));
}

#[tokio::test]
async fn unknown_executions_and_other_state_machines_are_left_alone() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let stranger = start(STRANGER, &unique("stranger")).await;
    let never_ran = format!(
        "arn:aws:states:us-east-1:123456789012:execution:{LOCKED}:{}",
        unique("never-ran")
    );
    let (their_lock, ghost_lock) = (unique("stranger-lock"), unique("ghost-lock"));
    hold(&sweeper.store, &their_lock, &stranger).await;
    hold(&sweeper.store, &ghost_lock, &never_ran).await;
    let stopped_at = stop(&stranger).await;

    let events = [
        status_change(&stranger, "ABORTED"),
        status_change(&never_ran, "ABORTED"),
    ];
    let report = sweeper
        .sweep(&sqs_batch(&events), stopped_at.plus_seconds(86_400))
        .await
        .unwrap();

    assert_eq!(report.skipped, 2, "{report:?}");
    assert_eq!(owner_of(&their_lock).await, Some(stranger));
    assert_eq!(owner_of(&ghost_lock).await, Some(never_ran));
}

#[tokio::test]
async fn one_failing_record_is_reported_alone_and_the_rest_of_the_batch_is_swept() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("batch-ok")).await;
    let lock = unique("batch-lock");
    hold(&sweeper.store, &lock, &ended).await;
    let stopped_at = stop(&ended).await;
    // Step Functions refuses to describe a malformed ARN (InvalidArn): that
    // record fails, and only that one is delivered again.
    let broken = "not-an-arn";

    let batch = sqs_batch(&[
        status_change(broken, "ABORTED"),
        status_change(&ended, "ABORTED"),
    ]);
    let report = sweeper
        .sweep(&batch, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();

    assert_eq!(
        serde_json::to_value(&report).unwrap()["batchItemFailures"],
        json!([{"itemIdentifier": "message-0"}])
    );
    assert_eq!(report.released.len(), 1);
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn a_timed_out_execution_delivered_twice_is_released_once() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("twice")).await;
    let lock = unique("twice-lock");
    hold(&sweeper.store, &lock, &ended).await;
    let after_grace = stop(&ended).await.plus_seconds(GRACE);
    let event = status_change(&ended, "TIMED_OUT");

    // EventBridge delivers at least once: the same event twice in one batch, then again.
    let first = sweeper
        .sweep(&sqs_batch(&[event.clone(), event.clone()]), after_grace)
        .await
        .unwrap();
    let again = sweeper
        .sweep(&sqs_batch(&[event]), after_grace)
        .await
        .unwrap();

    assert_eq!(first.released.len(), 1);
    assert!(again.released.is_empty());
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn an_acquire_that_lands_after_the_end_event_is_swept_when_the_grace_has_passed() {
    // The execution is stopped while its acquire is in flight; the grant lands
    // after the end event was sent. A sweep that looked at once would find
    // nothing and leave the lock to its lease; this one defers until the grace
    // (longer than the acquire function's timeout) has passed, and only then
    // reads the owner index: the late grant is there.
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("late")).await;
    let lock = unique("late-acquire");
    let stopped_at = stop(&ended).await;
    let event = sqs_batch(&[status_change(&ended, "ABORTED")]);

    let at_once = sweeper.sweep(&event, stopped_at).await.unwrap();
    assert_eq!(at_once.deferred, 1, "{at_once:?}");
    // The late grant: Lambda's Init (up to 10 s) and the acquire function's
    // own 10 s timeout after the end, the latest a call in flight can land.
    hold_at(&sweeper.store, &lock, &ended, stopped_at.plus_seconds(20)).await;
    let later = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();

    assert_eq!(later.released.len(), 1, "{later:?}");
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn events_of_other_shapes_are_ignored_not_failed() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let running = start(LOCKED, &unique("still-running")).await;
    let lock = unique("still-running");
    hold(&sweeper.store, &lock, &running).await;
    let mut wrong_source = status_change(&running, "ABORTED");
    wrong_source["source"] = json!("aws.batch");

    let events = [
        status_change(&running, "RUNNING"),
        status_change(&running, "PENDING_REDRIVE"),
        wrong_source,
        json!({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}),
        json!("not an object"),
    ];
    let report = sweeper
        .sweep(&sqs_batch(&events), EpochMillis::now())
        .await
        .unwrap();

    assert!(report.released.is_empty());
    assert_eq!(report.ignored, events.len());
    assert_eq!(owner_of(&lock).await, Some(running));
}

#[tokio::test]
async fn a_grant_taken_after_the_end_is_left_to_the_redriven_run_even_if_step_functions_looks_stale(
) {
    // DescribeExecution is eventually consistent: just after a redrive it may
    // still show the old end. A grant the execution took after that end (the
    // redriven run re-ran Acquire Lock) is not the ended run's, and stays.
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("stale-view")).await;
    let lock = unique("regranted");
    let stopped_at = stop(&ended).await;
    // Just past the latest instant an acquire of the ended run could land.
    let regranted_at = stopped_at.plus_seconds(LATE_ACQUIRE_SECONDS + 1);
    hold_at(&sweeper.store, &lock, &ended, regranted_at).await;

    let report = sweeper
        .sweep(
            &sqs_batch(&[status_change(&ended, "ABORTED")]),
            regranted_at.plus_seconds(GRACE),
        )
        .await
        .unwrap();

    assert!(report.released.is_empty(), "{report:?}");
    assert_eq!(owner_of(&lock).await, Some(ended));
}

#[tokio::test]
async fn a_succeeded_execution_that_could_not_release_is_swept() {
    // `Succeed And Leave Lock To Cleanup`: the workload succeeded, the release
    // kept failing, the execution SUCCEEDED holding its lock. Its end event
    // must free it like any other end. (moto runs no state machine, so the
    // execution here is a stopped one; the event's status is what is tested.)
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("succeeded")).await;
    let lock = unique("left-to-cleanup");
    hold(&sweeper.store, &lock, &ended).await;
    let after_grace = stop(&ended).await.plus_seconds(GRACE);

    let report = sweeper
        .sweep(
            &sqs_batch(&[status_change(&ended, "SUCCEEDED")]),
            after_grace,
        )
        .await
        .unwrap();

    assert_eq!(report.released.len(), 1, "{report:?}");
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn a_store_failure_during_the_sweep_is_reported_for_redelivery_never_dropped() {
    let queue_url = queue().await;
    let mut sweeper = sweeper(GRACE, &queue_url).await;
    sweeper.store = DynamoStore::new(client().await, "no-such-lock-table");
    let ended = start(LOCKED, &unique("store-down")).await;
    let after_grace = stop(&ended).await.plus_seconds(GRACE);
    let event = status_change(&ended, "ABORTED");

    let batch = sweeper
        .sweep(&sqs_batch(std::slice::from_ref(&event)), after_grace)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&batch).unwrap()["batchItemFailures"],
        json!([{"itemIdentifier": "message-0"}])
    );
    // Invoked directly, the failure is the function's error.
    let direct = sweeper.sweep(&event, after_grace).await;
    assert!(
        matches!(direct, Err(sfn_lock::LockError::StoreMisconfigured { .. })),
        "{direct:?}"
    );
}
