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

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::deadline::within;
use crate::error::LockError;
use crate::executions::{ExecutionStatus, Executions, Requeue};
use crate::model::{EpochMillis, Owner, ReleaseOutcome};
use crate::store::LockStore;
use crate::sweep_policy::{SweepPolicy, Verdict, LATE_ACQUIRE_SECONDS};

const EXECUTION_STATUS_CHANGE: &str = "Step Functions Execution Status Change";
const STEP_FUNCTIONS_SOURCE: &str = "aws.states";
/// Every terminal status. ABORTED and TIMED_OUT run no `Catch`; FAILED and
/// SUCCEEDED normally released already (the sweep then finds nothing), but a
/// release that failed after its retries is caught here too.
const ENDED: &[&str] = &["ABORTED", "TIMED_OUT", "FAILED", "SUCCEEDED"];

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecutionStatusChange {
    execution_arn: String,
    status: String,
}

/// One lock the sweep released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedLock {
    pub lock_name: String,
    pub owner: String,
}

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

/// What the sweep did with one event or one execution.
pub(crate) enum Handled {
    Released(Vec<ReleasedLock>),
    Ignored,
    Skipped,
    Deferred(u32),
}

/// The sweep's decision on one execution, and the releases it allows: what
/// an event's execution gets ([`Sweeper::sweep`]) and what each execution the
/// reconciler finds holding a lock gets (`reconcile.rs`), the same path.
pub(crate) struct Judge<'a, S, E> {
    pub store: &'a S,
    pub executions: &'a E,
    pub policy: &'a SweepPolicy,
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
                Some(left) => within(left, self.handle(event, now)).await?,
                None => self.handle(event, now).await?,
            };
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

impl<S: LockStore, E: Executions> Judge<'_, S, E> {
    /// Whatever said `owner` ended (an event, or the reconciler finding it
    /// holding a lock), Step Functions decides: released only if it has
    /// ended, is one this sweep serves, and the grace has passed.
    pub(crate) async fn execution_ended(
        &self,
        owner: &Owner,
        now: EpochMillis,
    ) -> Result<Handled, LockError> {
        let execution = owner.as_str();
        let Some(facts) = self.executions.describe(execution).await? else {
            warn!(
                execution,
                "Step Functions knows no such execution; its locks are left alone"
            );
            return Ok(Handled::Skipped);
        };
        let mut ended_at = facts.stop_date.unwrap_or(now);
        if facts.status == ExecutionStatus::Ended && self.policy.sweeps(&facts.state_machine_arn) {
            // One child per run: the first, and one for each redrive.
            for child in self.policy.children_of(execution, &facts) {
                ended_at = ended_at.max(self.child_ended_at(execution, &child, now).await?);
            }
        }
        match self.policy.verdict(&facts, ended_at, now) {
            Verdict::Skip(reason) => {
                warn!(execution, state_machine = %facts.state_machine_arn, redrive_count = facts.redrive_count,
                      reason, "sweep left the execution's locks alone");
                Ok(Handled::Skipped)
            }
            Verdict::Defer(seconds) => {
                info!(
                    execution,
                    seconds,
                    "execution ended too recently: its work may still run; looking again later"
                );
                Ok(Handled::Deferred(seconds))
            }
            Verdict::Release => {
                // Only grants made by the run that ended: if Step Functions
                // showed us a stale end and the execution, redriven, took the
                // lock again, that later grant stays its own.
                let ended = facts.stop_date.unwrap_or(now);
                let granted_before = ended.plus_seconds(LATE_ACQUIRE_SECONDS);
                Ok(Handled::Released(
                    release_all(self.store, owner, granted_before, now).await?,
                ))
            }
        }
    }

    /// When the attach variant's child ended: now if it was still running
    /// (it is stopped first), or the instant its parent's end counts from.
    async fn child_ended_at(
        &self,
        parent: &str,
        child: &str,
        now: EpochMillis,
    ) -> Result<EpochMillis, LockError> {
        match self.executions.describe(child).await? {
            None => {
                info!(
                    parent,
                    child, "the attach variant's execution started no child"
                );
                Ok(EpochMillis(0))
            }
            Some(facts) if facts.status == ExecutionStatus::Ended => {
                Ok(facts.stop_date.unwrap_or(now))
            }
            Some(_) => {
                let cause = format!(
                    "sfn-lock: the parent execution {parent} ended; its lock must not outlive it"
                );
                self.executions.stop(child, &cause).await?;
                warn!(
                    parent,
                    child, "stopped the child the ended parent left running"
                );
                Ok(now)
            }
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

/// The owner whose locks must go, if `event` reports an execution that ended.
/// Logs why anything else is ignored.
fn ended_execution(event: &Value) -> Option<Owner> {
    let change = match EventBridgeEvent::<ExecutionStatusChange>::deserialize(event) {
        Ok(change) => change,
        Err(error) => {
            warn!(error = %error, "ignored an event that is not a Step Functions execution status change");
            return None;
        }
    };
    if change.source != STEP_FUNCTIONS_SOURCE || change.detail_type != EXECUTION_STATUS_CHANGE {
        warn!(source = %change.source, detail_type = %change.detail_type, "ignored an event from another source");
        return None;
    }
    if !ENDED.contains(&change.detail.status.as_str()) {
        info!(execution = %change.detail.execution_arn, status = %change.detail.status,
              "ignored a status of an execution that has not ended");
        return None;
    }
    match Owner::new(change.detail.execution_arn) {
        Ok(owner) => Some(owner),
        Err(error) => {
            warn!(error = %error, "ignored an event whose executionArn is not a valid owner");
            None
        }
    }
}

async fn release_all<S: LockStore>(
    store: &S,
    owner: &Owner,
    granted_before: EpochMillis,
    now: EpochMillis,
) -> Result<Vec<ReleasedLock>, LockError> {
    let mut released = Vec::new();
    for lock_name in store.locks_held_by(owner).await? {
        // Boxed: the store's release nests the queue's futures, and the
        // sweep binary's async layout otherwise exceeds rustc's query depth.
        let outcome =
            Box::pin(store.release_granted_before(&lock_name, owner, granted_before, now)).await?;
        match outcome {
            ReleaseOutcome::Released => {
                info!(lock_name = %lock_name, owner = %owner, "released a lock its ended execution still held");
                released.push(ReleasedLock {
                    lock_name: lock_name.to_string(),
                    owner: owner.to_string(),
                });
            }
            // The index lags the table: the lock moved on after the query.
            ReleaseOutcome::NotHeld => {
                info!(lock_name = %lock_name, owner = %owner, "ended execution's lock was already released")
            }
            ReleaseOutcome::HeldByOther(holder) if holder.owner == owner.as_str() => {
                warn!(lock_name = %lock_name, owner = %owner, granted_before = %granted_before,
                      "kept a grant the execution took after it ended (a redriven run, or its workload renewing a lapsed lease); its lease bounds it")
            }
            ReleaseOutcome::HeldByOther(holder) => {
                info!(lock_name = %lock_name, owner = %owner, holder = %holder.owner,
                      "ended execution's lock was already taken over")
            }
        }
    }
    if released.is_empty() {
        info!(owner = %owner, "ended execution held no locks");
    }
    Ok(released)
}
