//! One execution's verdict and the releases it allows: the same path for an
//! end event (`cleanup`) and for a holder the reconciler finds (`reconcile`).

use serde::Serialize;
use tracing::{info, warn};

use crate::ports::executions::{ExecutionStatus, Executions};
use crate::ports::store::LockStore;
use crate::sweep::policy::{SweepPolicy, Verdict, LATE_ACQUIRE_SECONDS};
use crate::vocab::error::LockError;
use crate::vocab::model::{EpochMillis, Owner, ReleaseOutcome};

/// One lock the sweep released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedLock {
    pub lock_name: String,
    pub owner: String,
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
