//! The metrics' names and units, the contract the template's alarms and
//! dashboard are checked against ([`METRICS`] lists every one), and the
//! settings that switch them on.

use crate::vocab::error::LockError;

/// The CloudWatch units these metrics use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// A new grant (`outcome: granted`).
pub const GRANTED: &str = "Granted";
/// A grant renewed by its owner (`outcome: renewed`).
pub const RENEWED: &str = "Renewed";
/// An acquire refused because the lock was held (`LockUnavailable` or
/// `LockWaitTimeout`): one per attempt, so a Retry loop counts each try.
pub const CONTENDED: &str = "Contended";
/// A waiting caller gave up (`LockWaitTimeout`).
pub const WAIT_TIMEOUTS: &str = "WaitTimeouts";
/// `LockUnavailable` to a caller that will not retry it: it named no wait
/// bound and no task token, as skip-if-running asks; its run is skipped.
pub const SKIPPED_RUNS: &str = "SkippedRuns";
/// A caller took a place in the lock's queue (`taskToken`).
pub const QUEUED: &str = "Queued";
/// The place a queued caller got: the waiters queued then, itself included.
pub const QUEUE_LENGTH: &str = "QueueLength";
/// A new grant's time minus the `waitStartedAt` its request carried.
pub const WAIT_TIME: &str = "WaitTime";
/// An acquire that failed for another reason than contention: an invalid
/// request, or the store unavailable or misconfigured.
pub const ACQUIRE_ERRORS: &str = "AcquireErrors";
/// A release that freed the lock (`outcome: released`).
pub const RELEASED: &str = "Released";
/// A release that found the lock held by another owner: the caller's lease
/// ran out while it worked, and someone else's work overlapped it.
pub const HELD_BY_OTHER: &str = "HeldByOther";
/// A release's time minus the `acquiredAt` its event carried (acquire-lock's
/// answer passed through); no metric when the event has none.
pub const HOLD_TIME: &str = "HoldTime";
/// A lock the sweep released: an execution ended without releasing it.
pub const SWEEP_RELEASES: &str = "SweepReleases";
/// A lock the reconciler released: its execution ended and no event (or no
/// successful sweep of one) freed it, a lost status event.
pub const RECONCILE_RELEASES: &str = "ReconcileReleases";
/// A queue the reconciler woke: room was owed to its waiters and no release
/// had handed it on.
pub const RECONCILE_WAKES: &str = "ReconcileWakes";

/// Every metric this crate emits, with its unit.
pub const METRICS: &[(&str, Unit)] = &[
    (GRANTED, Unit::Count),
    (RENEWED, Unit::Count),
    (CONTENDED, Unit::Count),
    (WAIT_TIMEOUTS, Unit::Count),
    (SKIPPED_RUNS, Unit::Count),
    (QUEUED, Unit::Count),
    (QUEUE_LENGTH, Unit::Count),
    (WAIT_TIME, Unit::Milliseconds),
    (ACQUIRE_ERRORS, Unit::Count),
    (RELEASED, Unit::Count),
    (HELD_BY_OTHER, Unit::Count),
    (HOLD_TIME, Unit::Milliseconds),
    (SWEEP_RELEASES, Unit::Count),
    (RECONCILE_RELEASES, Unit::Count),
    (RECONCILE_WAKES, Unit::Count),
];

/// The dimension that holds the lock name. Every record also goes to the set
/// without dimensions, which the alarms use.
pub const LOCK_NAME_DIMENSION: &str = "LockName";
pub const DEFAULT_NAMESPACE: &str = "sfn-lock";

/// `METRICS`, `METRICS_NAMESPACE` and `METRICS_LOCK_NAME_DIMENSION`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsSettings {
    /// `METRICS`: `on` (default) or `off`.
    pub enabled: bool,
    /// `METRICS_NAMESPACE`: default `sfn-lock`.
    pub namespace: String,
    /// `METRICS_LOCK_NAME_DIMENSION`: `on` (default), or `off` for per-key
    /// locks, whose unbounded names would each make new CloudWatch metrics.
    pub lock_name_dimension: bool,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            enabled: true,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            lock_name_dimension: true,
        }
    }
}

impl MetricsSettings {
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LockError> {
        let defaults = MetricsSettings::default();
        let namespace = match lookup("METRICS_NAMESPACE") {
            None => defaults.namespace,
            Some(text) => valid_namespace(text.trim())?,
        };
        Ok(MetricsSettings {
            enabled: switch(&lookup, "METRICS")?,
            namespace,
            lock_name_dimension: switch(&lookup, "METRICS_LOCK_NAME_DIMENSION")?,
        })
    }
}

/// `on` or `off`, `on` when unset.
fn switch(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Result<bool, LockError> {
    match lookup(name)
        .map(|text| text.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(_) => Err(LockError::invalid(name, "must be on or off")),
    }
}

/// CloudWatch's rule for a namespace: 1 to 255 of `0-9A-Za-z . - _ / # :`
/// and space, not starting with `AWS/` (reserved for AWS services).
fn valid_namespace(text: &str) -> Result<String, LockError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c);
    if (1..=255).contains(&text.len()) && text.chars().all(allowed) && !text.starts_with("AWS/") {
        return Ok(text.to_owned());
    }
    Err(LockError::invalid(
        "METRICS_NAMESPACE",
        "must be 1 to 255 of 0-9 A-Z a-z . - _ / # : and space, not starting with AWS/",
    ))
}
