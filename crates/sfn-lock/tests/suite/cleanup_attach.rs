//! The sweep for the attach variant, whose execution runs the target state
//! machine as a child (`startExecution.sync:2`): the parent's lock must not be
//! freed while the child may still run. Also the real `release-execution-locks`
//! binary, as the local stack serves it. Step Functions and SQS are moto.

use crate::common;

use common::sfn::{
    hold, owner_of, queue, start, state_machine_arn, status, stop, sweeper, ATTACHED, LOCKED,
    TARGET,
};
use common::{invoke, sqs_batch, status_change, unique};
use serde_json::json;
use sfn_lock::sweep::attach::child_execution_arn;
use sfn_lock::EpochMillis;

const GRACE: u32 = 60;

/// Starts the child the ASL would start for `parent` (named as the ASL names it).
async fn start_child_of(parent: &str) -> String {
    let expected = child_execution_arn(&state_machine_arn(TARGET), parent, 0).unwrap();
    let name = expected.rsplit(':').next().unwrap();
    let child = start(TARGET, name).await;
    assert_eq!(child, expected);
    child
}

#[tokio::test]
async fn a_child_still_running_is_stopped_and_the_lock_waits_for_its_grace() {
    let sweeper = sweeper(GRACE, &queue().await).await;
    let parent = start(ATTACHED, &unique("parent")).await;
    let lock = unique("attach-lock");
    hold(&sweeper.store, &lock, &parent).await;
    let child = start_child_of(&parent).await;
    let parent_stopped = stop(&parent).await;
    let event = sqs_batch(&[status_change(&parent, "ABORTED")]);

    // The parent ended long ago, but its child still runs: it is stopped, and
    // the lock waits for the child's own grace (its in-flight tasks run on).
    let first = sweeper
        .sweep(&event, parent_stopped.plus_seconds(10 * GRACE))
        .await
        .unwrap();
    assert_eq!((first.deferred, first.released.len()), (1, 0), "{first:?}");
    assert_eq!(
        status(&child).await,
        aws_sdk_sfn::types::ExecutionStatus::Aborted
    );
    assert_eq!(owner_of(&lock).await, Some(parent.clone()));

    let later = sweeper
        .sweep(&event, EpochMillis::now().plus_seconds(GRACE))
        .await
        .unwrap();
    assert_eq!(later.released.len(), 1, "{later:?}");
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn a_child_that_ended_counts_from_its_own_end_and_no_child_frees_at_once() {
    let sweeper = sweeper(GRACE, &queue().await).await;
    let with_child = start(ATTACHED, &unique("parent-ended-child")).await;
    let childless = start(ATTACHED, &unique("parent-no-child")).await;
    let (lock_a, lock_b) = (unique("attach-a"), unique("attach-b"));
    hold(&sweeper.store, &lock_a, &with_child).await;
    hold(&sweeper.store, &lock_b, &childless).await;
    let child = start_child_of(&with_child).await;
    let parent_a = stop(&with_child).await;
    let parent_b = stop(&childless).await;
    let child_stopped = stop(&child).await; // after its parent

    let a = sqs_batch(&[status_change(&with_child, "ABORTED")]);
    let b = sqs_batch(&[status_change(&childless, "TIMED_OUT")]);
    let too_early = sweeper
        .sweep(&a, parent_a.max(child_stopped).plus_seconds(GRACE - 1))
        .await
        .unwrap();
    assert_eq!(too_early.deferred, 1, "{too_early:?}");
    let ended = sweeper
        .sweep(&a, child_stopped.plus_seconds(GRACE))
        .await
        .unwrap();
    assert_eq!(ended.released.len(), 1, "{ended:?}");
    let no_child = sweeper
        .sweep(&b, parent_b.plus_seconds(GRACE))
        .await
        .unwrap();
    assert_eq!(no_child.released.len(), 1, "{no_child:?}");
    assert_eq!(
        (owner_of(&lock_a).await, owner_of(&lock_b).await),
        (None, None)
    );
}

#[test]
fn the_real_binary_checks_step_functions_and_defers_an_early_end() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (ended, forged, lock, forged_lock) = runtime.block_on(async {
        let ended = start(LOCKED, &unique("binary")).await;
        let forged = start(LOCKED, &unique("binary-forged")).await;
        stop(&ended).await;
        (
            ended,
            forged,
            unique("binary-sweep"),
            unique("binary-forged"),
        )
    });
    for (name, owner) in [(&lock, &ended), (&forged_lock, &forged)] {
        invoke(
            "acquire-lock",
            json!({"lockName": name, "owner": owner}).to_string(),
        )
        .ok();
    }

    // Just stopped: the local stack's grace (600 s) has not passed, so the event
    // goes back to the cleanup queue; the running one's made-up end is skipped.
    let report = invoke(
        "release-execution-locks",
        sqs_batch(&[
            status_change(&ended, "ABORTED"),
            status_change(&forged, "ABORTED"),
        ])
        .to_string(),
    )
    .ok();

    assert_eq!(report["released"], json!([]));
    assert_eq!(
        (report["deferred"].clone(), report["skipped"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(report["batchItemFailures"], json!([]));
    runtime.block_on(async {
        assert_eq!(owner_of(&lock).await, Some(ended.clone()));
        assert_eq!(owner_of(&forged_lock).await, Some(forged.clone()));
    });
}
