//! What the lock functions report as CloudWatch metrics (one EMF line per
//! decision, `emf.rs`), their names, and the settings for it.
//!
//! The names below are the contract the template's alarms and dashboard are
//! checked against: [`METRICS`] lists every one with its unit.

mod emf;
mod names;
mod record;

pub use emf::{Metrics, Sample, Sink};
pub use names::{
    MetricsSettings, Unit, ACQUIRE_ERRORS, CONTENDED, DEFAULT_NAMESPACE, GRANTED, HELD_BY_OTHER,
    HOLD_TIME, LOCK_NAME_DIMENSION, METRICS, QUEUED, QUEUE_LENGTH, RECONCILE_RELEASES,
    RECONCILE_WAKES, RELEASED, RENEWED, SKIPPED_RUNS, SWEEP_RELEASES, WAIT_TIME, WAIT_TIMEOUTS,
};
