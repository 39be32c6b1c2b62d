//! The sweep's SQS batches when the invocation's time runs out: the records it
//! cannot finish are reported one by one (`batchItemFailures`), so the ones
//! already swept are not delivered again (a failed invocation would redeliver
//! the whole batch). Step Functions, SQS and DynamoDB are moto; one
//! execution's `DescribeExecution` is slowed down on purpose, in the test.

use crate::common;

use std::time::Duration;

use common::sfn::{hold, owner_of, queue, start, stop, sweeper};
use common::{sqs_batch, status_change, unique};
use serde_json::json;
use sfn_lock::ports::executions::{ExecutionFacts, Executions};
use sfn_lock::sweep::cleanup::Sweeper;
use sfn_lock::StoreError;

/// Step Functions, but slow to describe one execution.
struct SlowToDescribe<E> {
    inner: E,
    slow: String,
    delay: Duration,
}

impl<E: Executions> Executions for SlowToDescribe<E> {
    async fn describe(&self, arn: &str) -> Result<Option<ExecutionFacts>, StoreError> {
        if arn == self.slow {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.describe(arn).await
    }

    async fn stop(&self, arn: &str, cause: &str) -> Result<(), StoreError> {
        self.inner.stop(arn, cause).await
    }
}

#[tokio::test]
async fn only_the_records_the_invocation_has_no_time_left_for_are_reported() {
    const GRACE: u32 = 60;
    let base = sweeper(GRACE, &queue().await).await;
    let (quick, slow) = (
        start(common::sfn::LOCKED, &unique("quick")).await,
        start(common::sfn::LOCKED, &unique("slow")).await,
    );
    let (quick_lock, slow_lock) = (unique("quick-lock"), unique("slow-lock"));
    for (lock, owner) in [(&quick_lock, &quick), (&slow_lock, &slow)] {
        hold(&base.store, lock, owner).await;
    }
    let ended = stop(&quick).await.max(stop(&slow).await);
    let sweeper = Sweeper {
        store: base.store,
        executions: SlowToDescribe {
            inner: base.executions,
            slow: slow.clone(),
            // Far beyond the budget below: the slow record cannot finish in it.
            delay: Duration::from_secs(600),
        },
        requeue: base.requeue,
        policy: base.policy,
    };
    let batch = sqs_batch(&[
        status_change(&quick, "ABORTED"),
        status_change(&slow, "ABORTED"),
    ]);

    let report = sweeper
        .sweep_within(
            &batch,
            ended.plus_seconds(GRACE),
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap();

    assert_eq!(
        serde_json::to_value(&report).unwrap()["batchItemFailures"],
        json!([{"itemIdentifier": "message-1"}])
    );
    assert_eq!(report.released.len(), 1, "{report:?}");
    assert_eq!(owner_of(&quick_lock).await, None);
    assert_eq!(owner_of(&slow_lock).await, Some(slow));
}

#[tokio::test]
async fn a_record_without_a_message_id_fails_the_batch_before_anything_is_swept() {
    let sweeper = sweeper(60, &queue().await).await;
    let ended = start(common::sfn::LOCKED, &unique("no-id")).await;
    let lock = unique("no-id-lock");
    hold(&sweeper.store, &lock, &ended).await;
    let after_grace = stop(&ended).await.plus_seconds(60);
    let mut batch = sqs_batch(&[
        status_change(&ended, "ABORTED"),
        status_change(&ended, "ABORTED"),
    ]);
    batch["Records"][1]
        .as_object_mut()
        .unwrap()
        .remove("messageId");

    let result = sweeper.sweep(&batch, after_grace).await;

    assert!(result.is_err(), "{result:?}");
    assert_eq!(owner_of(&lock).await, Some(ended));
}
