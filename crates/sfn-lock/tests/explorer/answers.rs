//! Taking in the answers of finished operations as Step Functions would
//! (Retry, Catch, the task token), each checked against the store as it arrives.

use sfn_lock::{AcquireAnswer, EpochMillis, LockError};

use super::callers::{Phase, ACQUIRE_RETRIES, POLL_SECONDS};
use super::checks::{self, short};
use super::run::{Failure, Op, Run};

pub const RETRY_MS: i64 = 2_000;
/// The cleanup queue as the template makes it: a failed record comes back
/// after its VisibilityTimeout (210 s), at most maxReceiveCount (5) times.
const REDELIVERY_MS: i64 = 210_000;
const MAX_RECEIVES: u32 = 5;

impl Run {
    /// Takes in every finished operation's answer.
    pub async fn harvest(&mut self) -> Result<(), Failure> {
        if !self
            .force_targets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
        {
            self.confirm_forced().await;
        }
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
                    let answered = matches!(answer, Ok(Ok(_)));
                    self.took_acquire(id, answer).await?;
                    self.check_woken(id, answered).await?;
                }
                Op::Release {
                    handle,
                    held_at_start,
                    landings_at_start,
                    ..
                } => {
                    let answer = handle.await;
                    let answered = matches!(answer, Ok(Ok(_)));
                    self.took_release(id, answer, held_at_start, landings_at_start)
                        .await?;
                    self.check_woken(id, answered).await?;
                }
                Op::Reconcile(handle) => {
                    let answer = handle.await;
                    let answered = matches!(&answer, Ok(Ok(report)) if report.failed == 0);
                    self.check_woken(id, answered).await?;
                    let text = match answer {
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
                    let answer = handle.await;
                    self.check_woken(id, matches!(answer, Ok(Ok(_)))).await?;
                    let text = match answer {
                        Ok(Ok(freed)) => format!("forced release freed {freed} grant(s)"),
                        Ok(Err(error)) => format!("forced release failed: {}", error.error_type()),
                        Err(_) => "forced release died".into(),
                    };
                    self.note(id, text);
                }
                Op::Sweep {
                    handle,
                    body,
                    receives,
                } => {
                    let answer = handle.await;
                    let answered =
                        matches!(&answer, Ok(Ok(report)) if report.batch_item_failures.is_empty());
                    self.check_woken(id, answered).await?;
                    let (text, again) = match answer {
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
                    // SQS delivers a failed record again after its visibility
                    // timeout, up to maxReceiveCount; then it goes to the DLQ.
                    if again && receives < MAX_RECEIVES {
                        self.sweeps_due
                            .push((self.now + REDELIVERY_MS, body, receives));
                    } else if again {
                        self.note(id, "the record goes to the dead-letter queue");
                    }
                    self.note(id, text);
                }
            }
        }
        for (body, delay) in self.world.take_requeued() {
            self.sweeps_due
                .push((self.now + i64::from(delay) * 1000, body, 0));
        }
        Ok(())
    }

    /// The grants a forced release went for that are gone from the store:
    /// their holders are not told, so their belief no longer counts.
    /// Run before any answer is checked; a target still in the store stays
    /// a target while the operator's release may yet land.
    async fn confirm_forced(&mut self) {
        let targets: Vec<(usize, String, u64)> =
            std::mem::take(&mut *self.force_targets.lock().unwrap_or_else(|p| p.into_inner()));
        // Its write the operator's function gave up on may still land.
        let operator_running = self.ops.contains_key(&super::run::OPERATOR)
            || (self.orphans.iter()).any(|orphan| orphan.caller == super::run::OPERATOR);
        for (lock, owner, token) in targets {
            let view = self.inspect(lock).await;
            if checks::kept(&view, &owner, token).is_none() {
                self.forced
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((owner, token));
            } else if operator_running {
                self.force_targets
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((lock, owner, token));
            }
        }
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
        let queued = self.callers[id].queued;
        if queued && !renewing {
            let token = self.callers[id].token(now);
            if matches!(
                self.tokens.state(&token),
                Some(super::tokens::Task::Completed(_))
            ) {
                // The task took its output first: the function's own answer is moot.
                let deadline = now + self.callers[id].wait.unwrap_or(3_600) * 1000;
                self.callers[id].phase = Phase::Queued { token, deadline };
                return Ok(());
            }
        }
        match answer {
            Ok(Ok(AcquireAnswer::Lease(lease))) if !self.callers[id].queued || renewing => {
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
                self.check_kept(id, lease.fencing_token, expires_at, lease.outcome.as_str())
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
            Ok(Err(LockError::Unavailable { holder, .. })) if !renewing && !queued => {
                self.note(id, format!("contended (held by {}); waits", short(&holder)));
                self.callers[id].ready_at = now + POLL_SECONDS * 1000;
            }
            Ok(Err(LockError::StoreUnavailableWhileWaiting { .. })) if !renewing && !queued => {
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
        if caller.cli {
            // `sfn-lock run` exits 1 on a failed take, releasing nothing:
            // whatever landed is left to its lease.
            caller.phase = Phase::Done("exited 1");
            self.note(id, format!("acquire failed ({why}); the CLI exits 1"));
            return;
        }
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
}
