//! The numbers a request may set, each a type that holds only allowed values:
//! a lease, a limit, a wait bound.

use crate::vocab::error::LockError;
use crate::vocab::time::EpochMillis;

/// The longest lease: a Standard execution's one-year maximum duration.
pub const MAX_LEASE_SECONDS: u32 = 31_536_000;

/// A lease length in seconds, 1 to [`MAX_LEASE_SECONDS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseSeconds(u32);

impl LeaseSeconds {
    pub fn new(field: &str, seconds: i64) -> Result<Self, LockError> {
        match u32::try_from(seconds) {
            Ok(seconds) if (1..=MAX_LEASE_SECONDS).contains(&seconds) => Ok(LeaseSeconds(seconds)),
            _ => Err(LockError::invalid(field, lease_rule())),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

/// How many owners may hold one lock name at once: 1 (a mutex, the default)
/// to [`MAX_LIMIT`] (a semaphore).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Limit(u32);

/// The largest `limit` a request may ask for.
pub const MAX_LIMIT: u32 = 1000;

impl Limit {
    /// A mutex: the lock format every version of sfn-lock has written.
    pub const ONE: Limit = Limit(1);

    pub fn new(field: &str, limit: i64) -> Result<Self, LockError> {
        match u32::try_from(limit) {
            Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(Limit(limit)),
            _ => Err(LockError::invalid(
                field,
                format!("must be an integer from 1 to {MAX_LIMIT}"),
            )),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }

    pub fn is_mutex(self) -> bool {
        self.0 == 1
    }
}

fn lease_rule() -> String {
    format!("must be an integer from 1 to {MAX_LEASE_SECONDS}")
}

/// How long an acquire may keep retrying on contention before it gives up
/// with `LockWaitTimeout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitBound {
    /// When the caller began to wait; an ASL passes `$$.Execution.StartTime`.
    pub started_at: EpochMillis,
    pub max_wait_seconds: u32,
}

impl WaitBound {
    pub fn has_run_out(self, now: EpochMillis) -> bool {
        now >= self.started_at.plus_seconds(self.max_wait_seconds)
    }
}
