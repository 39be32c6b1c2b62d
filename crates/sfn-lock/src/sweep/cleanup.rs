//! Releasing the locks of executions that ended without releasing them.
//!
//! A `Catch` never runs when an execution is stopped (`ABORTED`) or reaches
//! the state machine's own `TimeoutSeconds` (`TIMED_OUT`). EventBridge reports
//! those ends, best effort; this sweep then releases every lock the execution
//! still owns, found through the store's owner index, so per-key lock names
//! need not be known in advance. The lease stays the bound when no event comes.
//!
//! The message only says which execution to look at. Before any release the
//! sweep asks Step Functions (`DescribeExecution`) whether that execution has
//! really ended, belongs to a state machine this sweep serves, and is not
//! running again after a redrive ([`SweepPolicy::verdict`]). It then waits
//! until the execution (and the attach variant's child, which it stops if need
//! be) has been over for `SWEEP_GRACE_SECONDS`: a workload task that was
//! running at the end runs on, and an acquire in flight at the end lands
//! meanwhile. An event that comes too early goes back to the queue with a
//! delay. Each SQS record succeeds or fails alone (`batchItemFailures`).

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tracing::warn;

use crate::ports::executions::{Executions, Requeue};
use crate::ports::store::LockStore;
use crate::sweep::events::ended_execution;
pub use crate::sweep::judge::ReleasedLock;
use crate::sweep::judge::{Handled, Judge};
use crate::sweep::policy::SweepPolicy;
use crate::vocab::deadline::within;
use crate::vocab::error::LockError;
use crate::vocab::model::EpochMillis;

/// An SQS record to be delivered again (Lambda's partial batch response).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    pub item_identifier: String,
}

/// What one invocation of the sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    pub released: Vec<ReleasedLock>,
    /// Events (or SQS records) that were not an ended execution.
    pub ignored: usize,
    /// Ended-execution events whose locks were left alone after checking
    /// Step Functions (running again, another state machine, no such execution).
    pub skipped: usize,
    /// Events to be looked at again later (sent back to the queue with a delay).
    pub deferred: usize,
    pub batch_item_failures: Vec<BatchItemFailure>,
}

/// The sweep and what it consults.
pub struct Sweeper<S, E, Q> {
    pub store: S,
    pub executions: E,
    /// The cleanup queue, for events that came too early; `None` for direct invocations.
    pub requeue: Option<Q>,
    pub policy: SweepPolicy,
}

impl<S: LockStore, E: Executions, Q: Requeue> Sweeper<S, E, Q> {
    /// Handles an SQS batch of EventBridge events (the deployed path) or a
    /// single EventBridge event (a direct invocation). Events of other shapes
    /// are logged and ignored: failing them would only redeliver them forever.
    /// A failure of one SQS record is reported for that record alone; a
    /// direct invocation's failure is the function's error. Every release is
    /// conditional, so a repeat changes nothing.
    pub async fn sweep(&self, event: &Value, now: EpochMillis) -> Result<SweepReport, LockError> {
        self.sweep_within(event, now, None).await
    }

    /// [`Sweeper::sweep`] within `budget` (the invocation's remaining time):
    /// each SQS record gets what is left of it, and the records it cannot
    /// finish are reported as failures, so the ones already swept are not
    /// delivered again (an error of the invocation would fail the whole batch).
    pub async fn sweep_within(
        &self,
        event: &Value,
        now: EpochMillis,
        budget: Option<Duration>,
    ) -> Result<SweepReport, LockError> {
        let deadline = budget.map(|budget| Instant::now() + budget);
        let remaining =
            || deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let mut report = SweepReport::default();
        if event.get("Records").is_none() {
            let handled = match remaining() {
                Some(left) => within(left, self.handle(event, now)).await,
                None => self.handle(event, now).await,
            }
            .inspect_err(|error| {
                warn!(error = %error, decision = "failed",
                      "sweep of the event failed; its source delivers it again");
            })?;
            report.record(handled);
            return Ok(report);
        }
        let batch = match SqsEvent::deserialize(event) {
            Ok(batch) => batch,
            Err(error) => {
                warn!(error = %error, "ignored an event with Records that is not an SQS batch");
                report.ignored += 1;
                return Ok(report);
            }
        };
        // An empty itemIdentifier would fail the whole batch: refuse such a
        // batch before any record of it is swept or re-queued.
        let message_ids = batch
            .records
            .iter()
            .map(|record| record.message_id.clone().filter(|id| !id.is_empty()))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| LockError::invalid("messageId", "every SQS record must have one"))?;
        for (record, message_id) in batch.records.iter().zip(message_ids) {
            let result = match remaining() {
                Some(left) if left.is_zero() => Err(LockError::StoreUnavailable {
                    detail: "no time left in this invocation".into(),
                }),
                Some(left) => within(left, self.handle_record(record, now)).await,
                None => self.handle_record(record, now).await,
            };
            match result {
                Ok(handled) => report.record(handled),
                Err(error) => {
                    warn!(message_id, error = %error, "sweep of one record failed; SQS delivers it again");
                    report.batch_item_failures.push(BatchItemFailure {
                        item_identifier: message_id,
                    });
                }
            }
        }
        Ok(report)
    }

    async fn handle_record(
        &self,
        record: &SqsMessage,
        now: EpochMillis,
    ) -> Result<Handled, LockError> {
        let body = record.body.as_deref().unwrap_or_default();
        let event = serde_json::from_str(body).unwrap_or(Value::Null);
        let handled = self.handle(&event, now).await?;
        if let Handled::Deferred(seconds) = handled {
            let requeue = self.requeue.as_ref().ok_or_else(|| {
                LockError::invalid("CLEANUP_QUEUE_URL", "must be set to defer an early event")
            })?;
            requeue.requeue(body, seconds).await?;
        }
        Ok(handled)
    }

    async fn handle(&self, event: &Value, now: EpochMillis) -> Result<Handled, LockError> {
        let Some(owner) = ended_execution(event) else {
            return Ok(Handled::Ignored);
        };
        self.judge().execution_ended(&owner, now).await
    }

    /// The per-execution path, on this sweep's store, Step Functions and policy.
    pub(crate) fn judge(&self) -> Judge<'_, S, E> {
        Judge {
            store: &self.store,
            executions: &self.executions,
            policy: &self.policy,
        }
    }
}

impl SweepReport {
    fn record(&mut self, handled: Handled) {
        match handled {
            Handled::Released(locks) => self.released.extend(locks),
            Handled::Ignored => self.ignored += 1,
            Handled::Skipped => self.skipped += 1,
            Handled::Deferred(_) => self.deferred += 1,
        }
    }
}
