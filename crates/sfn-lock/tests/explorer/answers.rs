//! Taking in the answers of finished operations as Step Functions would
//! (Retry, Catch, the task token), each checked against the store as it arrives.

use sfn_lock::{AcquireAnswer, EpochMillis, LockError};

use super::callers::{Phase, ACQUIRE_RETRIES, POLL_SECONDS};
use super::checks::{self, short};
use super::run::{Failure, Op, Run};

pub const RETRY_MS: i64 = 2_000;
/// The cleanup queue's visibility timeout: a failed record comes back after it.
const REDELIVERY_MS: i64 = 30_000;

impl Run {
    /// Takes in every finished operation's answer.
    pub async fn harvest(&mut self) -> Result<(), Failure> {
        let finished: Vec<usize> = self
            .ops
            .iter()
            .filter(|(_, op)| op.is_finished())
            .map(|(id, _)| *id)
            .collect();
        for id in finished {
            let Some(op) = self.ops.remove(&id) else {
                continue;
            };
            match op {
                Op::Acquire(handle) => {
                    let answer = handle.await;
                    self.took_acquire(id, answer).await?;
                }
                Op::Release {
                    handle,
                    held_at_start,
                    landings_at_start,
                } => {
                    let answer = handle.await;
                    self.took_release(id, answer, held_at_start, landings_at_start)
                        .await?;
                }
                Op::Reconcile(handle) => {
                    let text = match handle.await {
                        Ok(Ok(report)) => format!(
                            "reconciled: {} queue(s) woken, {} lock(s) trimmed ({} looked at), {} failed",
                            report.queues_woken.len(),
                            report.reclaimed.trimmed,
                            report.reclaimed.looked_at,
                            report.failed
                        ),
                        Ok(Err(error)) => format!("reconcile failed: {}", error.error_type()),
                        Err(_) => "reconcile died".into(),
                    };
                    self.note(id, text);
                }
                Op::Force(handle) => {
                    let text = match handle.await {
                        Ok(Ok(freed)) => format!("forced release freed {freed} grant(s)"),
                        Ok(Err(error)) => format!("forced release failed: {}", error.error_type()),
                        Err(_) => "forced release died".into(),
                    };
                    self.note(id, text);
                }
                Op::Sweep { handle, body } => {
                    let (text, again) = match handle.await {
                        Ok(Ok(report)) => (
                            format!(
                                "swept: {} released, {} deferred, {} failed",
                                report.released.len(),
                                report.deferred,
                                report.batch_item_failures.len()
                            ),
                            !report.batch_item_failures.is_empty(),
                        ),
                        Ok(Err(error)) => (format!("sweep failed: {}", error.error_type()), true),
                        Err(_) => ("sweep died".into(), true),
                    };
                    if again {
                        // SQS delivers the record again after its visibility timeout.
                        self.sweeps_due.push((self.now + REDELIVERY_MS, body));
                    }
                    self.note(id, text);
                }
            }
        }
        for (body, delay) in self.world.take_requeued() {
            self.sweeps_due
                .push((self.now + i64::from(delay) * 1000, body));
        }
        Ok(())
    }

    async fn took_acquire(
        &mut self,
        id: usize,
        answer: Result<Result<AcquireAnswer, LockError>, tokio::task::JoinError>,
    ) -> Result<(), Failure> {
        if self.callers[id].aborted {
            return Ok(()); // its execution is gone: nobody reads this answer
        }
        let renewing = matches!(self.callers[id].phase, Phase::Work { .. });
        let now = self.now;
        match answer {
            Ok(Ok(AcquireAnswer::Lease(lease))) if !self.callers[id].queued => {
                let expires_at = EpochMillis::parse_rfc3339(&lease.expires_at).map_or(0, |at| at.0);
                self.note(
                    id,
                    format!(
                        "{} token {} until t+{:.0}s",
                        lease.outcome,
                        lease.fencing_token,
                        (expires_at - self.start) as f64 / 1000.0
                    ),
                );
                self.check_kept(id, lease.fencing_token, expires_at, lease.outcome)
                    .await?;
                let caller = &mut self.callers[id];
                caller.belief = Some(super::callers::Belief {
                    token: lease.fencing_token,
                    expires_at,
                });
                if !renewing {
                    caller.phase = Phase::Work {
                        until: now + caller.work * 1000,
                        renewed: false,
                    };
                }
            }
            Ok(Ok(answer)) => {
                // Queued: whatever the function returns, the task waits on its token.
                let caller = &mut self.callers[id];
                let deadline = now + caller.wait.unwrap_or(3_600) * 1000;
                caller.phase = Phase::Queued {
                    token: caller.token(now),
                    deadline,
                };
                let text = match answer {
                    AcquireAnswer::Queued(q) => format!("queued at {}", q.position),
                    AcquireAnswer::Lease(l) => format!("{} at once (through its token)", l.outcome),
                };
                self.note(id, text);
            }
            Ok(Err(LockError::Unavailable { holder, .. })) if !renewing => {
                self.note(id, format!("contended (held by {}); waits", short(&holder)));
                self.callers[id].ready_at = now + POLL_SECONDS * 1000;
            }
            Ok(Err(LockError::StoreUnavailableWhileWaiting { .. })) if !renewing => {
                self.note(id, "store unavailable while waiting; waits");
                self.callers[id].ready_at = now + POLL_SECONDS * 1000;
            }
            Ok(Err(LockError::WaitTimeout { .. })) if !renewing => {
                self.note(id, "gave up waiting (LockWaitTimeout)");
                self.callers[id].phase = Phase::Done("gave up");
                self.ended(id, "FAILED");
            }
            Ok(Err(error)) if renewing => {
                self.note(
                    id,
                    format!(
                        "renewal failed: {}; works on under its grant",
                        error.error_type()
                    ),
                );
            }
            Ok(Err(error)) => self.failed_acquire(id, error.error_type().to_owned()),
            Err(_) if renewing => self.note(id, "renewal died"),
            Err(_) => self.failed_acquire(id, "the function died".to_owned()),
        }
        Ok(())
    }

    fn failed_acquire(&mut self, id: usize, why: String) {
        let now = self.now;
        let caller = &mut self.callers[id];
        caller.failures += 1;
        if caller.queued {
            // The task's retry gets a new token; the old one's task is over.
            let old = caller.token(now);
            self.tokens.close(&old);
            caller.tokens_used += 1;
        }
        if caller.failures <= ACQUIRE_RETRIES {
            caller.ready_at = now + RETRY_MS;
            self.note(
                id,
                format!("acquire failed ({why}); Step Functions retries"),
            );
        } else {
            caller.phase = Phase::Release {
                withdraw: caller.queued,
            };
            caller.ready_at = now;
            self.note(
                id,
                format!("acquire failed ({why}); retries spent, the Catch releases"),
            );
        }
    }

    async fn took_release(
        &mut self,
        id: usize,
        answer: Result<Result<sfn_lock::ReleaseResponse, LockError>, tokio::task::JoinError>,
        held_at_start: bool,
        landings_at_start: (usize, usize),
    ) -> Result<(), Failure> {
        if self.callers[id].aborted {
            return Ok(());
        }
        let now = self.now;
        match answer {
            Ok(Ok(response)) => {
                self.note(id, format!("release answered {}", response.outcome));
                if let Some(belief) = self.callers[id].belief {
                    let view = self.inspect(self.callers[id].lock).await;
                    let still = checks::kept(&view, &self.callers[id].owner, belief.token);
                    if response.released && still.is_some_and(|expires| expires > now) {
                        return Err(self.fail(format!("honest: c{id} was answered released, but its grant (token {}) is still in the store", belief.token)));
                    }
                    let live = belief.expires_at > now + super::callers::SKEW_BOUND_MS;
                    let (system, releases) = self.landings_besides(id);
                    let touched = system > landings_at_start.0;
                    // DESIGN.md, "Release records": the lock keeps one release
                    // record, so another release landing between this call's
                    // landed attempt and the SDK's retry of it makes the retry
                    // answer `not_held`. Documented, and excused here only then.
                    let overwritten =
                        releases > landings_at_start.1 && response.outcome == "not_held";
                    if !response.released && held_at_start && live && !touched && !overwritten {
                        return Err(self.fail(format!("honest: c{id}'s release answered {} although its live grant (token {}) was freed by nobody else", response.outcome, belief.token)));
                    }
                }
                let caller = &mut self.callers[id];
                caller.belief = None;
                caller.phase = Phase::Done("released");
                self.ended(id, "SUCCEEDED");
            }
            Ok(Err(error)) => {
                self.note(
                    id,
                    format!(
                        "release failed: {}; Step Functions retries",
                        error.error_type()
                    ),
                );
                self.callers[id].ready_at = now + RETRY_MS;
            }
            Err(_) => {
                self.note(id, "release died; Step Functions retries");
                self.callers[id].ready_at = now + RETRY_MS;
            }
        }
        Ok(())
    }
}
