//! The storage contract behind the lock. DynamoDB is the first implementation;
//! S3 conditional writes and SSM Parameter Store fit the same three calls.

use std::future::Future;

use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::vocab::request::{LeaseSeconds, Limit, Waiting};
use crate::vocab::view::{LockList, LockView};

/// Every call must be a single atomic decision at the store (a conditional
/// write), never a read followed by a write.
pub trait LockStore: Send + Sync {
    /// Grants one of the lock's `limit` permits if fewer than `limit` live
    /// owners hold it (expired ones do not count), renews the caller's own
    /// live grant, or reports the live holders. `now` decides expiry: the
    /// store compares it to the recorded expiries inside its conditional write.
    /// `limit` 1 is the mutex.
    fn acquire_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        now: EpochMillis,
    ) -> impl Future<Output = Result<AcquireOutcome, StoreError>> + Send;

    /// [`LockStore::acquire_with_limit`] for a mutex.
    fn acquire(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        now: EpochMillis,
    ) -> impl Future<Output = Result<AcquireOutcome, StoreError>> + Send {
        self.acquire_with_limit(lock_name, owner, lease, Limit::ONE, now)
    }

    /// [`LockStore::acquire_with_limit`] for a caller that waits in a queue
    /// instead of failing: a grant or renewal completes `waiting.token` with the
    /// grant at once; otherwise the caller joins the lock's queue, atomically
    /// with the state that refused it, and a later release hands it the lock.
    /// A store without a queue refuses (the default).
    fn acquire_or_queue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        waiting: &Waiting,
        now: EpochMillis,
    ) -> impl Future<Output = Result<AcquireOutcome, StoreError>> + Send {
        let _ = (lock_name, owner, lease, limit, waiting, now);
        std::future::ready(Err(StoreError::Refused {
            field: "taskToken".into(),
            rule: "is not supported by this lock store: it keeps no queue".into(),
        }))
    }

    /// Frees `owner`'s grant of the lock, if, and only if, it holds one; other
    /// holders' grants stay. `limit` is the one the grant was asked with: a
    /// hint of where to look first, never a condition. A caller still queued
    /// leaves the queue. A freed permit goes to the oldest queued waiter.
    fn release_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        now: EpochMillis,
    ) -> impl Future<Output = Result<ReleaseOutcome, StoreError>> + Send;

    /// [`LockStore::release_with_limit`] for a mutex.
    fn release(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        now: EpochMillis,
    ) -> impl Future<Output = Result<ReleaseOutcome, StoreError>> + Send {
        self.release_with_limit(lock_name, owner, Limit::ONE, now)
    }

    /// Frees the lock if `owner` holds it under a grant made at or before
    /// `granted_before`; a later grant of the same owner is left alone
    /// (answered `HeldByOther` naming that owner). The sweep's guard against
    /// a stale view of an execution that was redriven and took the lock again.
    fn release_granted_before(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: EpochMillis,
        now: EpochMillis,
    ) -> impl Future<Output = Result<ReleaseOutcome, StoreError>> + Send;

    /// The names of every lock `owner` holds (live or expired, not yet taken
    /// over), for the cleanup after an execution ended without releasing.
    fn locks_held_by(
        &self,
        owner: &Owner,
    ) -> impl Future<Output = Result<Vec<LockName>, StoreError>> + Send;

    /// The lock as one read sees it: its grants (live and expired), last
    /// fencing token and queue length. Writes nothing.
    fn inspect(
        &self,
        lock_name: &LockName,
    ) -> impl Future<Output = Result<LockView, StoreError>> + Send;

    /// Up to `max` locks that have a grant, live or expired. Writes nothing;
    /// reads pages of the store's whole content (DESIGN.md, "Operators'
    /// reads", gives the cost per store).
    fn list_held(&self, max: usize) -> impl Future<Output = Result<LockList, StoreError>> + Send;

    /// Up to `max` locks whose queue may be owed something that no release
    /// will bring: a hand-off whose wake-up is unconfirmed, or waiters on a
    /// lock no live holder keeps (a queue behind a live mutex holder is
    /// healthy and left out; a semaphore's is listed, its room being known
    /// only to its waiters). The reconciler's list, read at `now`. A store
    /// without a queue has none (the default).
    fn queues_to_wake(
        &self,
        max: usize,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Vec<LockName>, StoreError>> + Send {
        let _ = (max, now);
        std::future::ready(Ok(Vec::new()))
    }

    /// Reclaims the storage of up to `max` locks nobody uses any more (the
    /// SSM store: `store/document/ssm/reclaim.rs`); the reconciler's third step. A store
    /// whose idle locks cost nothing does nothing (the default).
    fn reclaim_idle(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<Reclaimed, StoreError>> + Send {
        let _ = max;
        std::future::ready(Ok(Reclaimed::default()))
    }

    /// What every release does for the lock's queue, for a lock whose
    /// releases have all happened: sends the wake-ups earlier hand-offs owe,
    /// then hands room to the oldest waiters. Writes nothing when nothing
    /// is owed. Whether it did anything: sent an owed wake-up or handed the
    /// lock on. A store without a queue does nothing (the default).
    fn wake_queue(
        &self,
        lock_name: &LockName,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (lock_name, now);
        std::future::ready(Ok(false))
    }
}

/// What one reclaim pass did (`LockStore::reclaim_idle`; on a store with
/// nothing to reclaim, all zero).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reclaimed {
    /// Locks read (the listing showed old generations to trim).
    pub looked_at: usize,
    /// Locks trimmed to their newest generation and `current`.
    pub trimmed: usize,
    /// Generations deleted.
    pub deleted: usize,
    /// Locks whose read or deletion failed (logged); the next pass tries again.
    pub failed: usize,
    /// More locks than the pass looked at may need trimming.
    pub truncated: bool,
}
