//! A lock as one read saw it, for operators (`sfn-lock status`, `list`).
//! Never the ground for a decision: every change is decided by a conditional
//! write, and this picture may be stale by the time anyone reads it.

use crate::vocab::model::{EpochMillis, LockName};

/// How many locks `list` reports unless asked otherwise, and the cap on
/// what one call may ask: listing reads every lock the store keeps.
pub const DEFAULT_LIST_MAX: usize = 100;
pub const MAX_LIST_MAX: usize = 10_000;

/// One grant the store records, live or expired (not yet taken over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub owner: String,
    pub fencing_token: u64,
    pub acquired_at: EpochMillis,
    pub expires_at: EpochMillis,
}

impl Grant {
    pub fn is_live(&self, now: EpochMillis) -> bool {
        self.expires_at >= now
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockView {
    pub lock_name: LockName,
    /// Every recorded grant, the first to end first; empty when free.
    pub grants: Vec<Grant>,
    /// The last fencing token given; the next grant gets a higher one.
    /// `None`: the store has no record of the lock.
    pub fencing_token: Option<u64>,
    /// Waiters in the lock's queue; `None` where the store keeps no queue.
    pub queue_length: Option<usize>,
}

impl LockView {
    pub fn new(lock_name: LockName, mut grants: Vec<Grant>) -> Self {
        grants.sort_by_key(|grant| grant.expires_at);
        LockView {
            lock_name,
            grants,
            fencing_token: None,
            queue_length: None,
        }
    }

    /// Whether any grant is live at `now`.
    pub fn is_held(&self, now: EpochMillis) -> bool {
        self.grants.iter().any(|grant| grant.is_live(now))
    }
}

/// The held locks a bounded listing found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockList {
    pub locks: Vec<LockView>,
    /// `true` if it stopped at its bound: there may be more.
    pub truncated: bool,
}
