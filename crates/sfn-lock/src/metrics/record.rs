//! Which samples each decision reports: one EMF line per acquire, release,
//! sweep and reconcile pass.

use crate::metrics::emf::{Metrics, Sample};
use crate::metrics::names::{
    MetricsSettings, Unit, ACQUIRE_ERRORS, CONTENDED, GRANTED, HELD_BY_OTHER, HOLD_TIME, QUEUED,
    QUEUE_LENGTH, RECONCILE_RELEASES, RECONCILE_WAKES, RELEASED, RENEWED, SKIPPED_RUNS,
    SWEEP_RELEASES, WAIT_TIME, WAIT_TIMEOUTS,
};
use crate::sweep::cleanup::SweepReport;
use crate::sweep::reconcile::ReconcileReport;
use crate::vocab::answer::{AcquireAnswer, ReleaseResponse};
use crate::vocab::error::LockError;
use crate::vocab::model::{EpochMillis, Outcome};
use crate::vocab::request::AcquireRequest;

impl Metrics {
    /// [`Metrics::stdout`] with the settings of the function's environment.
    pub fn from_env() -> Result<Self, LockError> {
        let settings = MetricsSettings::from_lookup(|name| std::env::var(name).ok())?;
        Ok(Metrics::stdout(settings))
    }

    /// An acquire refused before any decision: its event was not a valid request.
    pub(crate) fn invalid_acquire(&self, now: EpochMillis) {
        self.record(None, now, &[Sample::count(ACQUIRE_ERRORS)]);
    }

    pub(crate) fn acquire(
        &self,
        request: &AcquireRequest,
        answer: &Result<AcquireAnswer, LockError>,
        now: EpochMillis,
    ) {
        let samples = acquire_samples(request, answer, now);
        self.record(Some(request.lock_name.as_str()), now, &samples);
    }

    /// A release's decision; `acquired_at` from its event, when it carries one.
    pub(crate) fn release(
        &self,
        response: &ReleaseResponse,
        acquired_at: Option<EpochMillis>,
        now: EpochMillis,
    ) {
        // `not_held` reports nothing: an earlier release (or the sweep) freed it.
        let samples = match response.outcome {
            Outcome::Released => match acquired_at {
                Some(acquired_at) => vec![
                    Sample::count(RELEASED),
                    Sample::millis(HOLD_TIME, elapsed(acquired_at, now)),
                ],
                None => vec![Sample::count(RELEASED)],
            },
            Outcome::HeldByOther => vec![Sample::count(HELD_BY_OTHER)],
            _ => vec![],
        };
        self.record(Some(&response.lock_name), now, &samples);
    }

    /// One record per lock the sweep released.
    pub fn swept(&self, report: &SweepReport, now: EpochMillis) {
        for lock in &report.released {
            self.record(Some(&lock.lock_name), now, &[Sample::count(SWEEP_RELEASES)]);
        }
    }

    /// One record per lock the reconciler released and per queue it woke.
    pub fn reconciled(&self, report: &ReconcileReport, now: EpochMillis) {
        for lock in &report.released {
            self.record(
                Some(&lock.lock_name),
                now,
                &[Sample::count(RECONCILE_RELEASES)],
            );
        }
        for lock_name in &report.queues_woken {
            self.record(Some(lock_name), now, &[Sample::count(RECONCILE_WAKES)]);
        }
    }
}

fn acquire_samples(
    request: &AcquireRequest,
    answer: &Result<AcquireAnswer, LockError>,
    now: EpochMillis,
) -> Vec<Sample> {
    match answer {
        Ok(AcquireAnswer::Lease(lease)) if lease.outcome == Outcome::Renewed => {
            vec![Sample::count(RENEWED)]
        }
        Ok(AcquireAnswer::Lease(_)) => {
            let mut samples = vec![Sample::count(GRANTED)];
            if let Some(wait) = request.wait {
                samples.push(Sample::millis(WAIT_TIME, elapsed(wait.started_at, now)));
            }
            samples
        }
        Ok(AcquireAnswer::Queued(queued)) => vec![
            Sample::count(QUEUED),
            Sample {
                name: QUEUE_LENGTH,
                unit: Unit::Count,
                value: u64::from(queued.position),
            },
        ],
        Err(LockError::Unavailable { .. })
            if request.wait.is_none() && request.task_token.is_none() =>
        {
            vec![Sample::count(CONTENDED), Sample::count(SKIPPED_RUNS)]
        }
        Err(LockError::Unavailable { .. }) => vec![Sample::count(CONTENDED)],
        Err(LockError::WaitTimeout { .. }) => {
            vec![Sample::count(CONTENDED), Sample::count(WAIT_TIMEOUTS)]
        }
        Err(_) => vec![Sample::count(ACQUIRE_ERRORS)],
    }
}

/// Milliseconds from `since` to `now`; 0 if clocks disagree about the order.
fn elapsed(since: EpochMillis, now: EpochMillis) -> u64 {
    u64::try_from(now.0.saturating_sub(since.0)).unwrap_or(0)
}

#[cfg(test)]
mod tests;
