//! What the sweep asks Step Functions, counted: nothing once the invocation
//! has no time left, and no child lookup for a parent that is still running.
//! (Which calls it makes matters on AWS: each costs time from a 30 s budget.)

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::sfn::{hold, owner_of, queue, start, stop, sweeper, ATTACHED, LOCKED};
use common::{sqs_batch, status_change, unique};
use serde_json::json;
use sfn_lock::ports::executions::{ExecutionFacts, Executions};
use sfn_lock::sweep::cleanup::Sweeper;
use sfn_lock::{EpochMillis, StoreError};

/// Step Functions, with every `DescribeExecution` counted as it is asked.
struct Counted<E> {
    inner: E,
    describes: Arc<AtomicUsize>,
}

impl<E: Executions> Executions for Counted<E> {
    async fn describe(&self, arn: &str) -> Result<Option<ExecutionFacts>, StoreError> {
        self.describes.fetch_add(1, Ordering::SeqCst);
        self.inner.describe(arn).await
    }

    async fn stop(&self, arn: &str, cause: &str) -> Result<(), StoreError> {
        self.inner.stop(arn, cause).await
    }
}

async fn counted_sweeper(
    grace: u32,
) -> (
    Sweeper<
        sfn_lock::DynamoStore,
        Counted<sfn_lock::aws::executions::StepFunctions>,
        sfn_lock::aws::executions::SqsRequeue,
    >,
    Arc<AtomicUsize>,
) {
    let base = sweeper(grace, &queue().await).await;
    let describes = Arc::new(AtomicUsize::new(0));
    let counted = Sweeper {
        store: base.store,
        executions: Counted {
            inner: base.executions,
            describes: describes.clone(),
        },
        requeue: base.requeue,
        policy: base.policy,
    };
    (counted, describes)
}

#[tokio::test]
async fn with_no_time_left_every_record_is_reported_and_nothing_is_asked() {
    let (sweeper, describes) = counted_sweeper(60).await;
    let ended = start(LOCKED, &unique("no-time")).await;
    let lock = unique("no-time-lock");
    hold(&sweeper.store, &lock, &ended).await;
    let after_grace = stop(&ended).await.plus_seconds(60);
    let batch = sqs_batch(&[status_change(&ended, "ABORTED")]);

    let report = sweeper
        .sweep_within(&batch, after_grace, Some(Duration::ZERO))
        .await
        .unwrap();

    assert_eq!(
        serde_json::to_value(&report).unwrap()["batchItemFailures"],
        json!([{"itemIdentifier": "message-0"}])
    );
    assert_eq!(describes.load(Ordering::SeqCst), 0, "no work started");
    assert_eq!(owner_of(&lock).await, Some(ended));
}

#[tokio::test]
async fn a_running_attached_parent_is_asked_about_once_and_its_child_never() {
    let (sweeper, describes) = counted_sweeper(60).await;
    let parent = start(ATTACHED, &unique("running-parent")).await;
    let lock = unique("running-parent-lock");
    hold(&sweeper.store, &lock, &parent).await;

    let report = sweeper
        .sweep(&status_change(&parent, "FAILED"), EpochMillis::now())
        .await
        .unwrap();

    assert_eq!(report.skipped, 1, "{report:?}");
    assert_eq!(describes.load(Ordering::SeqCst), 1, "the parent only");
    assert_eq!(owner_of(&lock).await, Some(parent));
}

#[tokio::test]
async fn records_that_are_not_an_sqs_batch_are_counted_as_ignored() {
    let (sweeper, describes) = counted_sweeper(60).await;
    let report = sweeper
        .sweep(&json!({"Records": "not a list"}), EpochMillis::now())
        .await
        .unwrap();
    assert_eq!(report.ignored, 1, "{report:?}");
    assert_eq!(describes.load(Ordering::SeqCst), 0);
}
