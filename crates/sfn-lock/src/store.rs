//! The storage contract behind the lock. DynamoDB is the first implementation;
//! S3 conditional writes and SSM Parameter Store fit the same three calls.

use std::future::Future;

use crate::error::StoreError;
use crate::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::request::LeaseSeconds;

/// Every call must be a single atomic decision at the store (a conditional
/// write), never a read followed by a write.
pub trait LockStore: Send + Sync {
    /// Grants a free or expired lock, renews the caller's own live lease, or
    /// reports the live holder. `now` decides expiry: the store compares it to
    /// the recorded expiry inside its conditional write.
    fn acquire(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        now: EpochMillis,
    ) -> impl Future<Output = Result<AcquireOutcome, StoreError>> + Send;

    /// Frees the lock if, and only if, `owner` holds it.
    fn release(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        now: EpochMillis,
    ) -> impl Future<Output = Result<ReleaseOutcome, StoreError>> + Send;

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
}
