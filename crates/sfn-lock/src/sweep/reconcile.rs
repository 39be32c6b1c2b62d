//! The reconciler: what the sweep does when no event came.
//!
//! EventBridge delivers execution status events on a best-effort basis. A
//! lost ABORTED or TIMED_OUT event would leave its execution's lock held
//! until its lease ends (long by design), and a free lock's queue sleeps when
//! every release, sweep or acquire that would have woken it failed. On a
//! schedule (the template's `ReconcileSchedule`) the sweep function is
//! invoked with `{"sfnLockReconcile": {}}` and, within a bounded budget:
//!
//! 1. lists the locks with grants (`LockStore::list_held`, at most
//!    [`MAX_RECONCILE_LOCKS`]) and, for each holder that is an execution of
//!    a state machine the sweep serves, takes exactly the sweep's path for an
//!    ended execution ([`Judge::execution_ended`]): Step Functions' status,
//!    never a running or redriven execution's lock, nothing before the grace
//!    after its end (and its attach child's), only grants made before its end.
//!    One the grace has not yet passed is left for the next run: nothing is
//!    re-queued. No execution is started after [`MAX_RECONCILE_DESCRIBES`]
//!    `DescribeExecution` calls (an attach execution's children may take
//!    the last one a few past it);
//! 2. wakes each queue `LockStore::queues_to_wake` names (at most
//!    [`MAX_RECONCILE_QUEUES`]) with `LockStore::wake_queue`: what a release
//!    would have done for it;
//! 3. trims the storage of up to [`MAX_RECONCILE_RECLAIMS`] locks nobody
//!    changes (`LockStore::reclaim_idle`: SSM's, `store/document/ssm/reclaim.rs`);
//! 4. reports what it did ([`ReconcileReport`]); a run cut short by its
//!    budget says `truncated`, and the next run goes on.
//!
//! Each execution and each queue gets what is left of the invocation's time
//! (the deadline guard); the locks take at most two thirds of it, so that the
//! queues are looked at in every run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::ports::executions::{ExecutionFacts, Executions, Requeue};
use crate::ports::listing_pace::unpaced;
use crate::ports::store::{LockStore, Reclaimed};
use crate::sweep::cleanup::Sweeper;
use crate::sweep::judge::{Handled, Judge, ReleasedLock};
use crate::sweep::policy::SweepPolicy;
use crate::sweep::reclaim::reclaim;
pub use crate::sweep::reclaim::MAX_RECONCILE_RECLAIMS;
use crate::sweep::wake_queues::{bounded, wake_queues};
use crate::vocab::deadline::within;
use crate::vocab::error::{LockError, StoreError};
use crate::vocab::model::{EpochMillis, Owner};

/// The key of the scheduled input: `{"sfnLockReconcile": {}}`.
pub const RECONCILE_KEY: &str = "sfnLockReconcile";
/// Locks one run lists (and looks at the holders of).
pub const MAX_RECONCILE_LOCKS: usize = 100;
/// `DescribeExecution` calls one run makes (an attach execution's child counts too).
pub const MAX_RECONCILE_DESCRIBES: usize = 100;
/// Queues one run wakes.
pub const MAX_RECONCILE_QUEUES: usize = 100;

/// Whether `event` asks for a reconciler run: an object under [`RECONCILE_KEY`].
pub fn is_reconcile(event: &Value) -> bool {
    event.get(RECONCILE_KEY).is_some_and(Value::is_object)
}

/// A run's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconcileLimits {
    pub locks: usize,
    pub describes: usize,
    pub queues: usize,
    /// Locks reclaimed a step of (`sweep/reclaim.rs`).
    pub reclaims: usize,
}

impl Default for ReconcileLimits {
    fn default() -> Self {
        ReconcileLimits {
            locks: MAX_RECONCILE_LOCKS,
            describes: MAX_RECONCILE_DESCRIBES,
            queues: MAX_RECONCILE_QUEUES,
            reclaims: MAX_RECONCILE_RECLAIMS,
        }
    }
}

/// What one reconciler run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileReport {
    /// Locks with a grant the listing returned.
    pub locks_looked_at: usize,
    /// Holders looked up in Step Functions (the sweep's path).
    pub executions_checked: usize,
    /// Locks freed: their execution had ended, the grace had passed.
    pub released: Vec<ReleasedLock>,
    /// Holders whose locks stay: running or redriven, unknown to Step
    /// Functions, or no execution of a state machine the sweep serves.
    pub kept: usize,
    /// Executions that ended within the grace (or whose look failed): the
    /// next run looks again.
    pub left_for_later: usize,
    /// Queues owed a wake-up that were handed on.
    pub queues_woken: Vec<String>,
    /// Idle locks' storage trimmed (SSM): looked at, trimmed, deleted.
    pub reclaimed: Reclaimed,
    /// Executions or queues whose look failed (store or Step Functions errors).
    pub failed: usize,
    /// The run stopped at a bound (locks, calls, time): there may be more.
    pub truncated: bool,
}

/// [`Executions`] that counts the calls made through it.
struct Counted<'a, E> {
    inner: &'a E,
    describes: AtomicUsize,
}

impl<E: Executions> Executions for Counted<'_, E> {
    async fn describe(&self, execution_arn: &str) -> Result<Option<ExecutionFacts>, StoreError> {
        self.describes.fetch_add(1, Ordering::SeqCst);
        self.inner.describe(execution_arn).await
    }

    async fn stop(&self, execution_arn: &str, cause: &str) -> Result<(), StoreError> {
        self.inner.stop(execution_arn, cause).await
    }
}

/// The state machine of a standard execution ARN
/// (`arn:P:states:R:A:execution:MACHINE:NAME`); `None` for anything else.
fn state_machine_of(execution_arn: &str) -> Option<String> {
    let (prefix, rest) = execution_arn.split_once(":execution:")?;
    let (machine, name) = rest.split_once(':')?;
    if !prefix.starts_with("arn:") || machine.is_empty() || name.is_empty() || name.contains(':') {
        return None;
    }
    Some(format!("{prefix}:stateMachine:{machine}"))
}

/// Whether the sweep may look `owner` up: an execution of a state machine it serves.
fn swept_execution(policy: &SweepPolicy, owner: &str) -> bool {
    state_machine_of(owner).is_some_and(|machine| policy.sweeps(&machine))
}

impl<S: LockStore, E: Executions, Q: Requeue> Sweeper<S, E, Q> {
    /// One reconciler run with the default limits and no time bound.
    pub async fn reconcile(&self, now: EpochMillis) -> Result<ReconcileReport, LockError> {
        self.reconcile_within(now, None, ReconcileLimits::default())
            .await
    }

    /// One reconciler run within `budget` (the invocation's remaining time)
    /// and `limits`. Only the listing's failure fails the run; a failure for
    /// one execution or one queue is counted and the run goes on.
    pub async fn reconcile_within(
        &self,
        now: EpochMillis,
        budget: Option<Duration>,
        limits: ReconcileLimits,
    ) -> Result<ReconcileReport, LockError> {
        let start = Instant::now();
        let deadline = budget.map(|budget| start + budget);
        let locks_deadline = budget.map(|budget| start + budget * 2 / 3);
        let left = |until: Option<Instant>| {
            until.map(|until| until.saturating_duration_since(Instant::now()))
        };
        let mut report = ReconcileReport::default();

        // Unpaced (ports/listing_pace.rs): bounded by `limits.locks`, it must end
        // within the budget below, which an SSM listing at 5 requests a
        // second would not for more than about 50 locks.
        let listed = bounded(
            left(locks_deadline),
            unpaced(self.store.list_held(limits.locks)),
        )
        .await
        .inspect_err(|error| {
            warn!(error = %error, decision = "failed",
                  "reconciler: could not list the held locks; the next run looks again");
        })?;
        report.locks_looked_at = listed.locks.len();
        report.truncated = listed.truncated;
        let mut owners: Vec<&str> = Vec::new();
        for grant in listed.locks.iter().flat_map(|lock| &lock.grants) {
            if !owners.contains(&grant.owner.as_str()) {
                owners.push(&grant.owner);
            }
        }
        let counted = Counted {
            inner: &self.executions,
            describes: AtomicUsize::new(0),
        };
        let judge = Judge {
            store: &self.store,
            executions: &counted,
            policy: &self.policy,
        };
        for holder in owners {
            let owner = match Owner::new(holder) {
                Ok(owner) if swept_execution(&self.policy, holder) => owner,
                _ => {
                    info!(owner = holder, decision = "kept",
                          "reconciler: the holder is no execution of a state machine the sweep serves; its lock is left to its owner and lease");
                    report.kept += 1;
                    continue;
                }
            };
            if counted.describes.load(Ordering::SeqCst) >= limits.describes {
                info!(
                    limit = limits.describes,
                    "reconciler: DescribeExecution budget used; the next run goes on"
                );
                report.truncated = true;
                break;
            }
            let result = match left(locks_deadline) {
                Some(time) if time.is_zero() => {
                    info!("reconciler: time budget for locks used; the next run goes on");
                    report.truncated = true;
                    break;
                }
                Some(time) => within(time, Box::pin(judge.execution_ended(&owner, now))).await,
                None => Box::pin(judge.execution_ended(&owner, now)).await,
            };
            report.executions_checked += 1;
            match result {
                Ok(Handled::Released(locks)) => {
                    info!(execution = holder, decision = "released", locks = locks.len(),
                          "reconciler: the execution had ended without releasing (its status event lost or failed)");
                    report.released.extend(locks);
                }
                Ok(Handled::Deferred(seconds)) => {
                    info!(execution = holder, decision = "left for later", seconds,
                          "reconciler: the execution ended within the grace; the next run looks again");
                    report.left_for_later += 1;
                }
                Ok(Handled::Skipped | Handled::Ignored) => {
                    info!(execution = holder, decision = "kept",
                          "reconciler: Step Functions does not show the execution ended; its locks stay");
                    report.kept += 1;
                }
                Err(error) => {
                    warn!(execution = holder, decision = "failed", error = %error,
                          "reconciler: could not decide on the execution; the next run looks again");
                    report.failed += 1;
                    report.left_for_later += 1;
                }
            }
        }

        let queues = Box::pin(wake_queues(&self.store, limits.queues, now, deadline)).await;
        report.queues_woken = queues.woken;
        report.failed += queues.failed;
        report.truncated |= queues.truncated;
        match Box::pin(reclaim(&self.store, limits.reclaims, left(deadline))).await {
            Ok(done) => {
                report.truncated |= done.truncated;
                report.failed += done.failed;
                report.reclaimed = done;
            }
            Err(error) => {
                warn!(error = %error, decision = "failed", "reconciler: could not reclaim idle locks");
                report.failed += 1;
                report.truncated = true;
            }
        }
        info!(
            locks_looked_at = report.locks_looked_at,
            trimmed = report.reclaimed.trimmed,
            executions_checked = report.executions_checked,
            released = report.released.len(),
            kept = report.kept,
            left_for_later = report.left_for_later,
            queues_woken = report.queues_woken.len(),
            failed = report.failed,
            truncated = report.truncated,
            "reconciler run done"
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
