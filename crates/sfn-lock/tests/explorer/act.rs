//! The callers' side of a run: starting the operations that are due, and
//! taking in their answers as Step Functions would (Retry, Catch, the task
//! token), checking each answer against the store as it arrives.

use sfn_lock::{AcquireAnswer, EpochMillis, LockError};

use super::callers::{belief_from_output, Phase, ACQUIRE_RETRIES, POLL_SECONDS};
use super::checks::{self, short};
use super::run::{Failure, Op, Run, OPERATOR, RECONCILE_EVERY_MS};
use super::tokens::Task;
use super::wire::CALLER;

const RETRY_MS: i64 = 2_000;

impl Run {
    /// Starts every operation whose time has come; whether any started.
    pub async fn start_due(&mut self) -> Result<bool, Failure> {
        let mut started = false;
        for id in 0..self.callers.len() {
            if self.ops.contains_key(&id) || self.callers[id].is_done() {
                continue;
            }
            self.queued_progress(id).await?;
            let now = self.now;
            let caller = &mut self.callers[id];
            match caller.phase.clone() {
                Phase::Work { until, .. } if now >= until => {
                    caller.phase = Phase::Release { withdraw: false };
                    caller.ready_at = now;
                }
                Phase::Work {
                    until,
                    renewed: false,
                } if caller.renews && now >= until - caller.work * 500 => {
                    caller.phase = Phase::Work {
                        until,
                        renewed: true,
                    };
                    self.start_acquire(id, "renews");
                    started = true;
                    continue;
                }
                _ => {}
            }
            let caller = &self.callers[id];
            if caller.ready_at > now {
                continue;
            }
            match caller.phase {
                Phase::Acquire => {
                    self.start_acquire(id, "acquires");
                    started = true;
                }
                Phase::Release { withdraw } => {
                    self.start_release(id, withdraw).await;
                    started = true;
                }
                _ => {}
            }
        }
        let sweeps: Vec<_> = self
            .sweeps_due
            .iter()
            .filter(|(at, _)| *at <= self.now)
            .cloned()
            .collect();
        self.sweeps_due.retain(|(at, _)| *at > self.now);
        for (_, body) in sweeps {
            let id = Run::sweep_id(self.sweeps_started);
            self.sweeps_started += 1;
            let event: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let (sweeper, now) = (self.sweeper.clone(), EpochMillis(self.now));
            self.note(id, "sweeps an ended execution's event");
            self.ops.insert(
                id,
                Op::Sweep(spawn(id, &self.wire, async move {
                    sweeper.sweep(&event, now).await
                })),
            );
            started = true;
        }
        let reconciler = Run::reconciler_id();
        if self.now >= self.next_reconcile && !self.ops.contains_key(&reconciler) {
            self.next_reconcile = self.now + RECONCILE_EVERY_MS;
            let (sweeper, now) = (self.sweeper.clone(), EpochMillis(self.now));
            self.ops.insert(
                reconciler,
                Op::Reconcile(spawn(reconciler, &self.wire, async move {
                    sweeper.reconcile(now).await
                })),
            );
            started = true;
        }
        Ok(started)
    }

    fn start_acquire(&mut self, id: usize, what: &str) {
        let (name, limit) = self.lock_of(id);
        let caller = &self.callers[id];
        let now = caller.clock(self.now);
        let event = caller.acquire_event(&name, limit, self.now);
        if caller.queued && matches!(caller.phase, Phase::Acquire) {
            self.tokens.open(&caller.token(self.now));
        }
        self.note(id, format!("{what} (clock {:+} ms)", caller.skew));
        let locker = self.locker.clone();
        self.ops.insert(
            id,
            Op::Acquire(spawn(id, &self.wire, async move {
                locker.answer_within(&event, now, None).await
            })),
        );
    }

    async fn start_release(&mut self, id: usize, withdraw: bool) {
        let (name, limit) = self.lock_of(id);
        let belief = self.callers[id].belief;
        let held_at_start = match belief {
            Some(belief) => {
                let view = self.inspect(self.callers[id].lock).await;
                checks::kept(&view, &self.callers[id].owner, belief.token)
                    .is_some_and(|expires| expires > self.now + super::callers::SKEW_BOUND_MS)
            }
            None => false,
        };
        self.system_landings = 0;
        let caller = &self.callers[id];
        let event = caller.release_event(&name, limit, withdraw);
        let now = caller.clock(self.now);
        self.note(
            id,
            if withdraw {
                "withdraws from the queue"
            } else {
                "releases"
            },
        );
        let locker = self.locker.clone();
        let handle = spawn(
            id,
            &self.wire,
            async move { locker.release(&event, now).await },
        );
        self.ops.insert(
            id,
            Op::Release {
                handle,
                held_at_start,
            },
        );
    }

    /// A queued caller's task: completed with a grant, or timed out.
    async fn queued_progress(&mut self, id: usize) -> Result<(), Failure> {
        let Phase::Queued { token, deadline } = self.callers[id].phase.clone() else {
            return Ok(());
        };
        match self.tokens.state(&token).cloned() {
            Some(Task::Completed(output)) => {
                let Some(belief) = belief_from_output(&output) else {
                    return Err(self.fail(format!(
                        "honest: c{id}'s task was completed with no grant: {output}"
                    )));
                };
                self.note(id, format!("woken with token {}", belief.token));
                self.check_kept(id, belief.token, belief.expires_at, "woken")
                    .await?;
                let caller = &mut self.callers[id];
                caller.belief = Some(belief);
                caller.phase = Phase::Work {
                    until: self.now + caller.work * 1000,
                    renewed: false,
                };
            }
            _ if self.now >= deadline => {
                self.tokens.close(&token);
                self.note(id, "its queued task times out; the Catch withdraws");
                let caller = &mut self.callers[id];
                caller.phase = Phase::Release { withdraw: true };
                caller.ready_at = self.now;
            }
            _ => {}
        }
        Ok(())
    }

    /// A grant answered to `id` must be one the store keeps (unless it expired).
    async fn check_kept(
        &mut self,
        id: usize,
        token: u64,
        expires_at: i64,
        what: &str,
    ) -> Result<(), Failure> {
        if expires_at <= self.now {
            return Ok(());
        }
        let view = self.inspect(self.callers[id].lock).await;
        if checks::kept(&view, &self.callers[id].owner, token).is_none() {
            return Err(self.fail(format!(
                "honest: c{id} was {what} token {token}, a grant the store does not keep"
            )));
        }
        Ok(())
    }

    /// Takes in every finished operation's answer.
    pub async fn harvest(&mut self) -> Result<(), Failure> {
        let finished: Vec<usize> = self
            .ops
            .iter()
            .filter(|(_, op)| op_finished(op))
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
                } => {
                    let answer = handle.await;
                    self.took_release(id, answer, held_at_start).await?;
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
                Op::Sweep(handle) => {
                    let text = match handle.await {
                        Ok(Ok(report)) => format!(
                            "swept: {} released, {} deferred",
                            report.released.len(),
                            report.deferred
                        ),
                        Ok(Err(error)) => format!("sweep failed: {}", error.error_type()),
                        Err(_) => "sweep died".into(),
                    };
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
                    if !response.released && held_at_start && live && self.system_landings == 0 {
                        return Err(self.fail(format!("honest: c{id}'s release answered {} although its live grant (token {}) was freed by nobody else", response.outcome, belief.token)));
                    }
                }
                let caller = &mut self.callers[id];
                caller.belief = None;
                caller.phase = Phase::Done("released");
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

    /// An execution ends with no Catch (aborted, timed out): a workload it
    /// started runs on; its ended event reaches the sweep, or is lost.
    pub fn abort_one(&mut self) {
        let alive: Vec<usize> = (0..self.callers.len())
            .filter(|id| !self.callers[*id].is_done())
            .collect();
        if alive.is_empty() {
            return;
        }
        let id = alive[self.draws.below(alive.len() as u64) as usize];
        let now = self.now;
        self.world.end(&self.callers[id].owner, EpochMillis(now));
        let caller = &mut self.callers[id];
        if let Phase::Work { until, .. } = caller.phase {
            caller.runs_until = Some(until);
        }
        if let Phase::Queued { token, .. } = &caller.phase {
            self.tokens.close(token);
        }
        caller.aborted = true;
        caller.phase = Phase::Done("aborted");
        let event_lost = self.draws.chance(20);
        let owner = caller.owner.clone();
        if !event_lost {
            let body = Run::sweep_event(&owner).to_string();
            self.sweeps_due
                .push((now + 1000 * self.draws.below(10) as i64, body));
        }
        self.note(
            id,
            format!(
                "its execution is aborted (no Catch){}",
                if event_lost {
                    "; the event is lost"
                } else {
                    ""
                }
            ),
        );
    }

    /// An operator frees a lock by hand, as `sfn-lock release --force` does.
    pub fn force_release(&mut self) {
        use sfn_lock::{LockStore, Owner, ReleaseOutcome};
        let lock = self.draws.below(self.locks.len() as u64) as usize;
        let name = self.locks[lock].0.clone();
        let (sweeper, forced, now) = (
            self.sweeper.clone(),
            self.forced.clone(),
            EpochMillis(self.now),
        );
        self.note(OPERATOR, format!("forces lock {lock} free"));
        let op = spawn(OPERATOR, &self.wire, async move {
            let view = sweeper.store.inspect(&name).await?;
            let mut freed = 0;
            for grant in view.grants {
                let holder = Owner::new(grant.owner.clone())?;
                forced
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((grant.owner.clone(), grant.fencing_token));
                let outcome = sweeper
                    .store
                    .release_granted_before(&name, &holder, grant.acquired_at, now)
                    .await?;
                freed += usize::from(outcome == ReleaseOutcome::Released);
            }
            Ok(freed)
        });
        self.ops.insert(OPERATOR, Op::Force(op));
    }

    /// The earliest moment something is due; `None` when the run is over.
    pub fn next_timer(&self) -> Option<i64> {
        let mut due: Vec<i64> = self.sweeps_due.iter().map(|(at, _)| *at).collect();
        for caller in &self.callers {
            match &caller.phase {
                Phase::Acquire | Phase::Release { .. } => due.push(caller.ready_at),
                Phase::Queued { deadline, .. } => due.push(*deadline),
                Phase::Work { until, .. } => due.push(*until),
                Phase::Done(_) => {}
            }
        }
        if due.is_empty() && self.ops.is_empty() {
            return None;
        }
        due.push(self.next_reconcile);
        due.into_iter().min().map(|at| at.max(self.now + 1))
    }

    pub fn still_waiting(&self) -> String {
        self.callers
            .iter()
            .filter(|c| !c.is_done())
            .map(|c| format!("c{} {:?}", c.id, c.phase))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn op_finished(op: &Op) -> bool {
    op.is_finished()
}

/// Runs `work` as caller `id`: its requests are parked under that name, and
/// the scheduler hears when it ends.
pub fn spawn<T: Send + 'static>(
    id: usize,
    wire: &super::wire::Wire,
    work: impl std::future::Future<Output = Result<T, LockError>> + Send + 'static,
) -> super::run::Answered<T> {
    let bell = wire.bell.clone();
    tokio::spawn(CALLER.scope(id, async move {
        let answer = work.await;
        bell.notify_one();
        answer
    }))
}
