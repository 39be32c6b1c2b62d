//! The wrapped execution's TimeoutSeconds and the lease its acquire asks for.
//!
//! The reviewed files have no execution timeout: each of their states is
//! bounded. The user's states are not (ASL has no TimeoutSeconds on a
//! Parallel), so a wrap keeps an execution timeout and makes it hold:
//!
//! TimeoutSeconds = U + W + A + H + R, where U is the user's own
//! TimeoutSeconds, W `--max-wait-seconds` (0 in `--mode skip`), A the most
//! the acquire can take past the wait's bound, H the held path after an
//! error (the Seconds of Wait For Workload To Stop) and R the most a release
//! can take. H is M, `--workload-max-run-seconds` (the longest any piece of
//! the work runs on after its state stopped), plus E = 300 s when a
//! Distributed Map at any depth runs Express child executions
//! (shape.rs's `express_child_map`): Step Functions cannot stop those
//! (StopExecution does not support Express state machines), so after the
//! Map failed one may run on up to the 300 s an Express execution lasts,
//! and its task's work M after that. So a
//! wait that runs out ends in LockWaitTimeout rather than TIMED_OUT, and an
//! execution admitted at the last moment of its wait still has U for its
//! states, then the held path and the release.
//!
//! Lease = TimeoutSeconds + H + `--lease-margin-seconds`, counted from the
//! grant, which is at or after the execution's start: the execution ends
//! within TimeoutSeconds of it, and a piece of its work may run on H after
//! that (Step Functions stops no Lambda invocation when an execution times
//! out, nor an Express child execution).
//!
//! The lease and the stack: acquire-lock refuses a lease above its
//! MAX_LEASE_SECONDS, the stack's MaxLeaseSeconds. Empty (the default) sets
//! none, so any lease up to the contract's `sfn_lock::MAX_LEASE_SECONDS`
//! (a year), which a wrap never exceeds, is granted; a stack with MaxLeaseSeconds set must allow the
//! lease the output asks for, which the wrap prints.
//!
//! A and R are read from the Retry blocks of the file's Acquire Lock and
//! release states, so that a changed retrier changes them. Acquire-lock
//! ends a wait with LockWaitTimeout at its first attempt at or after the
//! bound, and reports a store error inside the bound as LockUnavailable, so
//! past the bound: the attempt in flight at the bound, one capped backoff of
//! the LockUnavailable retrier, the next attempt, and at most every attempt
//! of the other retriers (Step Functions counts a retrier's attempts across
//! the whole state), each after its capped delay. In `--mode skip` there is
//! no LockUnavailable retrier: A is the acquire's own retries.

use serde_json::Value;
use sfn_lock::{LeaseSeconds, MAX_LEASE_SECONDS};

use super::template::{Mode, Settings, RELEASE_AFTER_FAILURE_STATE, RELEASE_STATE};

/// The longest one acquire-lock invocation takes: template.yaml's
/// AcquireLockFunction Timeout (18 s) plus Lambda's Init phase (limited to
/// 10 s; a longer Init is retried inside the invocation's own Timeout).
/// The acquire Task has no TimeoutSeconds of its own, so this bounds it.
pub(crate) const ACQUIRE_INVOCATION_SECONDS: u64 = 18 + 10;
/// The same for release-lock: ReleaseLockFunction's Timeout (26 s) + Init.
pub(crate) const RELEASE_INVOCATION_SECONDS: u64 = 26 + 10;
/// The largest TimeoutSeconds ASL accepts.
pub(crate) const MAX_TIMEOUT_SECONDS: u64 = 99_999_999;
/// E: how long an Express child execution of a Distributed Map may run on
/// after the Map failed (an Express execution lasts up to 5 minutes).
pub(crate) const EXPRESS_CHILD_SECONDS: u64 = 300;
/// More attempts than this in a summed retrier is no bound worth adding.
const MAX_SUMMED_ATTEMPTS: u64 = 100;

/// What the lock's states add around the user's states, in seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) mode: Mode,
    /// W: `--max-wait-seconds`, 0 in `--mode skip`.
    pub(crate) wait: u64,
    /// A: the most the acquire takes past the wait's bound.
    pub(crate) acquire: u64,
    /// M: `--workload-max-run-seconds`.
    pub(crate) held: u64,
    /// The Distributed Map with Express child executions that adds E to
    /// the held path, if any.
    pub(crate) express_map: Option<String>,
    /// R: the most a release takes, retries included.
    pub(crate) release: u64,
    /// `--lease-margin-seconds`.
    pub(crate) margin: u64,
}

/// A wrap's numbers for a user's TimeoutSeconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    /// U: the user's own TimeoutSeconds.
    pub(crate) user: u64,
    pub(crate) bounds: Bounds,
    /// The wrapped definition's TimeoutSeconds.
    pub(crate) execution_timeout: u64,
    /// The lease Acquire Lock asks for.
    pub(crate) lease: u64,
}

impl Bounds {
    /// The bounds of `template` (a reviewed file, filled in) with `settings`.
    pub(crate) fn new(settings: &Settings, template: &Value) -> Result<Bounds, String> {
        let state = |name: &str| {
            template["States"]
                .get(name)
                .ok_or_else(|| format!("{}: no state \"{name}\"", settings.file()))
        };
        let acquire = retry_bound(state("Acquire Lock")?, ACQUIRE_INVOCATION_SECONDS)?;
        let mut release = 0;
        for name in [RELEASE_STATE, RELEASE_AFTER_FAILURE_STATE] {
            release = release.max(retry_bound(state(name)?, RELEASE_INVOCATION_SECONDS)?);
        }
        Ok(Bounds {
            mode: settings.mode,
            wait: settings.wait_seconds(),
            acquire,
            held: u64::from(settings.workload_max_run_seconds),
            express_map: None,
            release,
            margin: u64::from(settings.lease_margin_seconds),
        })
    }

    /// These bounds for user states with `express_map`, a Distributed Map
    /// with Express child executions (shape.rs's `express_child_map`).
    pub(crate) fn with_express_map(&self, express_map: Option<String>) -> Bounds {
        Bounds {
            express_map,
            ..self.clone()
        }
    }

    /// H: how long Wait For Workload To Stop holds the lock, in seconds.
    pub(crate) fn held_path(&self) -> u64 {
        match self.express_map {
            Some(_) => self.held.saturating_add(EXPRESS_CHILD_SECONDS),
            None => self.held,
        }
    }

    /// Where H comes from, in short, for the sums.
    fn held_terms(&self) -> String {
        match &self.express_map {
            None => "--workload-max-run-seconds".into(),
            Some(map) => format!(
                "--workload-max-run-seconds {} + {EXPRESS_CHILD_SECONDS} s for the Express child \
                 executions of \"{map}\"",
                self.held
            ),
        }
    }

    /// H and where it comes from, for the notes and Comments.
    pub(crate) fn describe_held(&self) -> String {
        match &self.express_map {
            None => format!("{} s (--workload-max-run-seconds)", self.held),
            Some(map) => format!(
                "{} s (--workload-max-run-seconds {} + {EXPRESS_CHILD_SECONDS} s because the \
                 Express child executions of Distributed Map \"{map}\" cannot be stopped and \
                 run up to {EXPRESS_CHILD_SECONDS} s)",
                self.held_path(),
                self.held
            ),
        }
    }

    /// The timing for the user's TimeoutSeconds `user`, or why it cannot be.
    pub(crate) fn timing(&self, user: u64) -> Result<Timing, String> {
        let sum = |terms: &[u64]| {
            terms
                .iter()
                .try_fold(0_u64, |sum, term| sum.checked_add(*term))
        };
        let timing = |execution_timeout, lease| Timing {
            user,
            bounds: self.clone(),
            execution_timeout,
            lease,
        };
        let held = self.held_path();
        let execution_timeout = sum(&[user, self.wait, self.acquire, held, self.release])
            .filter(|seconds| *seconds <= MAX_TIMEOUT_SECONDS)
            .ok_or_else(|| {
                format!(
                    "TimeoutSeconds {user} makes the wrapped execution's TimeoutSeconds ({}) \
                     over the {MAX_TIMEOUT_SECONDS} ASL accepts",
                    timing(0, 0).terms()
                )
            })?;
        let lease = sum(&[execution_timeout, held, self.margin])
            .filter(|seconds| acquire_lock_accepts(*seconds))
            .ok_or_else(|| {
                format!(
                    "TimeoutSeconds {user} makes a lease of {} s ({}), over the \
                     {MAX_LEASE_SECONDS} acquire-lock accepts: lower TimeoutSeconds or those flags",
                    sum(&[execution_timeout, held, self.margin])
                        .map_or("too many".into(), |lease| lease.to_string()),
                    timing(execution_timeout, 0).lease_terms()
                )
            })?;
        Ok(timing(execution_timeout, lease))
    }
}

/// Whether acquire-lock takes `seconds` as a lease: the library's own rule
/// (`LeaseSeconds::new`, up to [`MAX_LEASE_SECONDS`], docs/contract.md
/// "acquire-lock"), so that a wrap never asks for a lease the function refuses.
fn acquire_lock_accepts(seconds: u64) -> bool {
    i64::try_from(seconds).is_ok_and(|seconds| LeaseSeconds::new("leaseSeconds", seconds).is_ok())
}

impl Timing {
    /// The TimeoutSeconds as its sum, term by term.
    pub(crate) fn terms(&self) -> String {
        let b = &self.bounds;
        let wait = match b.mode {
            Mode::Wait => format!(
                "{} (--max-wait-seconds) + {} (the acquire past the wait's bound: one capped \
                 backoff, its retries and their invocations)",
                b.wait, b.acquire
            ),
            Mode::Skip => format!(
                "{} (the acquire's retries and their invocations)",
                b.acquire
            ),
        };
        format!(
            "your {} + {wait} + {} (held after an error, {}) + {} (the release's retries and \
             their invocations)",
            self.user,
            b.held_path(),
            b.held_terms(),
            b.release
        )
    }

    /// The lease as its sum.
    fn lease_terms(&self) -> String {
        format!(
            "TimeoutSeconds {} + {} (held after an error, {}) + {} (--lease-margin-seconds)",
            self.execution_timeout,
            self.bounds.held_path(),
            self.bounds.held_terms(),
            self.bounds.margin
        )
    }

    /// What the execution timeout is and why, for stderr and the Comment.
    pub(crate) fn describe_timeout(&self) -> String {
        let late = match self.bounds.mode {
            Mode::Wait => {
                "a wait that runs out ends in LockWaitTimeout, and states admitted at \
                the last moment of the wait"
            }
            Mode::Skip => "states admitted after the acquire's last retry",
        };
        format!(
            "TimeoutSeconds is {} = {}, so that {late} still get their whole {} s, then the held \
             path and the release.",
            self.execution_timeout,
            self.terms(),
            self.user
        )
    }

    /// The lease and what a stack needs to grant it (docs/deploy.md, MaxLeaseSeconds).
    pub(crate) fn describe_lease(&self) -> String {
        let lease = self.lease;
        format!(
            "Its acquires ask for a lease of {lease} s ({}): a stack with MaxLeaseSeconds empty \
             (the default) accepts it; a stack with MaxLeaseSeconds set needs MaxLeaseSeconds \
             >= {lease}.",
            self.lease_terms()
        )
    }
}

/// The most `state` (a Lambda task) takes past the point its wait, if any,
/// is bounded: see the module's comment. `invocation` bounds one attempt.
fn retry_bound(state: &Value, invocation: u64) -> Result<u64, String> {
    let mut seconds = 0_u64;
    // The final attempt, which ends the state.
    let mut invocations = 1_u64;
    for retrier in state["Retry"].as_array().into_iter().flatten() {
        let waits = retrier["ErrorEquals"]
            .as_array()
            .is_some_and(|errors| errors.iter().any(|error| error == "LockUnavailable"));
        if waits {
            // One capped backoff, after the attempt in flight at the bound.
            let cap = retrier["MaxDelaySeconds"]
                .as_u64()
                .ok_or("the LockUnavailable retrier has no MaxDelaySeconds")?;
            seconds = seconds.saturating_add(cap);
            invocations = invocations.saturating_add(1);
        } else {
            let (delays, attempts) = summed_delays(retrier)?;
            seconds = seconds.saturating_add(delays);
            invocations = invocations.saturating_add(attempts);
        }
    }
    Ok(seconds.saturating_add(invocations.saturating_mul(invocation)))
}

/// The delays of every attempt of `retrier`, capped, added up (full jitter
/// waits at most the capped delay), and its number of attempts. ASL's
/// defaults: IntervalSeconds 1, BackoffRate 2.0, MaxAttempts 3, no cap.
fn summed_delays(retrier: &Value) -> Result<(u64, u64), String> {
    let attempts = retrier.get("MaxAttempts").map_or(Some(3), Value::as_u64);
    let interval = retrier
        .get("IntervalSeconds")
        .map_or(Some(1.0), Value::as_f64);
    let rate = retrier.get("BackoffRate").map_or(Some(2.0), Value::as_f64);
    let cap = retrier
        .get("MaxDelaySeconds")
        .map_or(Some(f64::MAX), Value::as_f64);
    let (Some(attempts), Some(interval), Some(rate), Some(cap)) = (attempts, interval, rate, cap)
    else {
        return Err(format!("a retrier that is not plain numbers: {retrier}"));
    };
    if attempts > MAX_SUMMED_ATTEMPTS {
        return Err(format!("a retrier with {attempts} attempts: {retrier}"));
    }
    let mut total = 0_u64;
    let mut delay = interval;
    for _ in 0..attempts {
        // `as` saturates: a delay past u64 is caught by the limits anyway.
        total = total.saturating_add(delay.min(cap).ceil() as u64);
        delay *= rate;
    }
    Ok((total, attempts))
}

#[cfg(test)]
mod tests;
