//! What `acquire-lock` and `release-lock` do with an event: validate it, make
//! one decision at the store, log that decision once, and answer.

use std::time::Duration;

use serde_json::Value;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::ports::store::LockStore;
use crate::vocab::answer::{AcquireAnswer, AcquireResponse, QueuedResponse, ReleaseResponse};
use crate::vocab::deadline::within_budget;
use crate::vocab::error::{LockError, StoreError};
use crate::vocab::model::{AcquireOutcome, EpochMillis, Lease, Outcome, ReleaseOutcome};
use crate::vocab::request::{AcquireRequest, LeaseSeconds, Limit, ReleaseRequest, Waiting};

/// The lease used when an acquire event names none (`DEFAULT_LEASE_SECONDS`).
pub const DEFAULT_LEASE_SECONDS: u32 = 900;

/// The lock's behaviour over any [`LockStore`].
#[derive(Clone, Debug)]
pub struct Locker<S> {
    store: S,
    default_lease: LeaseSeconds,
    /// The longest lease a request may ask for (`MAX_LEASE_SECONDS`); `None`:
    /// the contract's own limit. Whoever may invoke acquire-lock may hold a
    /// lock this long, so the template caps it at what its executions need.
    max_lease: Option<LeaseSeconds>,
    metrics: Metrics,
}

impl<S: LockStore> Locker<S> {
    pub fn new(store: S, default_lease: LeaseSeconds) -> Self {
        Locker {
            store,
            default_lease,
            max_lease: None,
            metrics: Metrics::off(),
        }
    }

    /// Refuses a request for a longer lease than `max` (`InvalidLockRequest`,
    /// field `leaseSeconds`), before anything is written.
    pub fn with_max_lease(mut self, max: Option<LeaseSeconds>) -> Self {
        self.max_lease = max;
        self
    }

    fn capped(&self, request: AcquireRequest) -> Result<AcquireRequest, LockError> {
        match (request.lease_seconds, self.max_lease) {
            (Some(asked), Some(max)) if asked.get() > max.get() => Err(LockError::invalid(
                "leaseSeconds",
                format!(
                    "must be at most {} (this function's MAX_LEASE_SECONDS)",
                    max.get()
                ),
            )),
            _ => Ok(request),
        }
    }

    /// Reports every decision to `metrics`; default [`Metrics::off`].
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub async fn acquire(
        &self,
        event: &Value,
        now: EpochMillis,
    ) -> Result<AcquireResponse, LockError> {
        self.acquire_within(event, now, None).await
    }

    /// [`Locker::acquire`] with the store call cut at `budget` (the
    /// invocation's remaining time): the cut is a store error, so a caller
    /// still inside its wait bound keeps waiting, as for any other. An event
    /// with `taskToken` is for [`Locker::answer_within`].
    pub async fn acquire_within(
        &self,
        event: &Value,
        now: EpochMillis,
        budget: Option<Duration>,
    ) -> Result<AcquireResponse, LockError> {
        match self.answer_within(event, now, budget).await? {
            AcquireAnswer::Lease(lease) => Ok(lease),
            AcquireAnswer::Queued(_) => Err(LockError::invalid(
                "taskToken",
                "queues the caller: use Locker::answer_within",
            )),
        }
    }

    /// `acquire-lock`'s whole behaviour: a grant, a renewal, a refusal, or,
    /// for an event with `taskToken`, a place in the queue.
    pub async fn answer_within(
        &self,
        event: &Value,
        now: EpochMillis,
        budget: Option<Duration>,
    ) -> Result<AcquireAnswer, LockError> {
        let request = AcquireRequest::from_event(event)
            .and_then(|request| self.capped(request))
            .inspect_err(|_| self.metrics.invalid_acquire(now))?;
        let answer = self.decide(&request, now, budget).await;
        self.metrics.acquire(&request, &answer, now);
        answer
    }

    async fn decide(
        &self,
        request: &AcquireRequest,
        now: EpochMillis,
        budget: Option<Duration>,
    ) -> Result<AcquireAnswer, LockError> {
        let lease = request.lease_seconds.unwrap_or(self.default_lease);
        let lock_name = request.lock_name.as_str();
        let owner = request.owner.as_str();
        let (name, who, limit) = (&request.lock_name, &request.owner, request.limit);
        let call = async {
            match &request.task_token {
                None => {
                    self.store
                        .acquire_with_limit(name, who, lease, limit, now)
                        .await
                }
                Some(token) => {
                    let waiting = Waiting {
                        token: token.clone(),
                        wait: request.wait,
                    };
                    self.store
                        .acquire_or_queue(name, who, lease, limit, &waiting, now)
                        .await
                }
            }
        };
        let outcome = match within_budget(budget, call).await {
            Ok(outcome) => outcome,
            Err(StoreError::Unavailable(detail))
                if request.wait.is_some_and(|wait| !wait.has_run_out(now)) =>
            {
                warn!(lock_name, owner, error = %detail,
                      "acquire failed at the store; the caller's wait goes on");
                return Err(LockError::StoreUnavailableWhileWaiting {
                    lock_name: lock_name.to_owned(),
                    detail,
                });
            }
            Err(error) => {
                warn!(lock_name, owner, error = %error, "acquire failed at the store");
                return Err(error.into());
            }
        };
        match outcome {
            AcquireOutcome::Queued { position } => {
                info!(lock_name, owner, position, "queued for the lock");
                Ok(AcquireAnswer::Queued(QueuedResponse {
                    lock_name: lock_name.to_owned(),
                    owner: owner.to_owned(),
                    outcome: Outcome::Queued,
                    position,
                }))
            }
            AcquireOutcome::Granted(granted) => {
                info!(lock_name, owner, fencing_token = granted.fencing_token,
                      expires_at = %granted.expires_at, "lock granted");
                Ok(response(granted, lease, request.limit, Outcome::Granted))
            }
            AcquireOutcome::Renewed(renewed) => {
                info!(lock_name, owner, fencing_token = renewed.fencing_token,
                      expires_at = %renewed.expires_at, "lock renewed");
                Ok(response(renewed, lease, request.limit, Outcome::Renewed))
            }
            AcquireOutcome::Held(contention) => {
                let live_holders: Vec<(String, String)> = contention
                    .holders
                    .iter()
                    .map(|holder| (holder.owner.clone(), holder.expires_at.to_rfc3339()))
                    .collect();
                let (holder, expires_at) = live_holders.first().cloned().ok_or_else(|| {
                    LockError::from(StoreError::Misconfigured(
                        "the store refused a grant and named no live holder".into(),
                    ))
                })?;
                let limit = contention.limit.get();
                match request.wait {
                    Some(wait) if wait.has_run_out(now) => {
                        warn!(
                            lock_name,
                            owner,
                            holder,
                            expires_at,
                            limit,
                            live_holders = live_holders.len(),
                            max_wait_seconds = wait.max_wait_seconds,
                            "gave up waiting for the lock"
                        );
                        Err(LockError::WaitTimeout {
                            lock_name: lock_name.to_owned(),
                            holder,
                            expires_at,
                            limit,
                            live_holders,
                            max_wait_seconds: wait.max_wait_seconds,
                        })
                    }
                    _ => {
                        info!(
                            lock_name,
                            owner,
                            holder,
                            expires_at,
                            limit,
                            live_holders = live_holders.len(),
                            "lock contended"
                        );
                        Err(LockError::Unavailable {
                            lock_name: lock_name.to_owned(),
                            holder,
                            expires_at,
                            limit,
                            live_holders,
                        })
                    }
                }
            }
        }
    }

    pub async fn release(
        &self,
        event: &Value,
        now: EpochMillis,
    ) -> Result<ReleaseResponse, LockError> {
        self.release_within(event, now, None).await
    }

    /// [`Locker::release`], its store call cut once `budget` (the
    /// invocation's remaining time) has passed.
    pub async fn release_within(
        &self,
        event: &Value,
        now: EpochMillis,
        budget: Option<Duration>,
    ) -> Result<ReleaseResponse, LockError> {
        let request = ReleaseRequest::from_event(event)?;
        let lock_name = request.lock_name.as_str();
        let owner = request.owner.as_str();
        let call =
            self.store
                .release_with_limit(&request.lock_name, &request.owner, request.limit, now);
        let outcome = within_budget(budget, call).await.inspect_err(
            |error| warn!(lock_name, owner, error = %error, "release failed at the store"),
        )?;
        let outcome = match outcome {
            ReleaseOutcome::Released => {
                info!(lock_name, owner, "lock released");
                Outcome::Released
            }
            ReleaseOutcome::HeldByOther(holder)
                if holder.follows_release_by(&request.owner, request.fencing_token) =>
            {
                // A retried release: the caller's own release had landed and
                // the new holder got the lock after it, with no overlap.
                info!(lock_name, owner, holder = %holder.owner, fencing_token = holder.fencing_token,
                      "lock released earlier by this owner; another owner holds it now");
                Outcome::Released
            }
            ReleaseOutcome::HeldByOther(_) | ReleaseOutcome::NotHeld if request.withdraw => {
                // A waiter that gave up and was never handed the lock: no
                // lost lease, nothing for an operator (no HeldByOther metric).
                info!(lock_name, owner, "the waiter gave up; it held nothing");
                Outcome::Withdrawn
            }
            ReleaseOutcome::NotHeld => {
                info!(lock_name, owner, "release found the lock not held");
                Outcome::NotHeld
            }
            ReleaseOutcome::HeldByOther(holder) => {
                // The caller's lease ran out and someone took over: the caller's work
                // overlapped another holder's, which is worth an operator's look.
                warn!(lock_name, owner, holder = %holder.owner, fencing_token = holder.fencing_token,
                      "release found the lock held by another owner; left it untouched");
                Outcome::HeldByOther
            }
        };
        let response = ReleaseResponse {
            lock_name: request.lock_name.to_string(),
            owner: request.owner.to_string(),
            released: outcome == Outcome::Released,
            outcome,
        };
        // The grant's start, if the event is acquire-lock's answer: no extra read.
        let acquired_at = event["acquiredAt"]
            .as_str()
            .and_then(EpochMillis::parse_rfc3339);
        self.metrics.release(&response, acquired_at, now);
        Ok(response)
    }
}

fn response(
    lease: Lease,
    lease_seconds: LeaseSeconds,
    limit: Limit,
    outcome: Outcome,
) -> AcquireAnswer {
    AcquireAnswer::Lease(AcquireResponse::new(&lease, lease_seconds, limit, outcome))
}
