//! Starting what is due: each caller's next operation (acquire, renewal,
//! release, withdraw), a queued caller's task completed or timed out, the
//! sweeps and the reconciler.

use sfn_lock::EpochMillis;

use super::callers::{belief_from_output, Phase};
use super::checks;
use super::events::spawn;
use super::run::{Failure, Op, Run};
use super::tokens::Task;

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
            .filter(|(at, _, _)| *at <= self.now)
            .cloned()
            .collect();
        self.sweeps_due.retain(|(at, _, _)| *at > self.now);
        for (_, body, receives) in sweeps {
            let id = Run::sweep_id(self.sweeps_started);
            self.sweeps_started += 1;
            // As the cleanup queue delivers it: a batch of one SQS record.
            let event =
                serde_json::json!({"Records": [{"messageId": format!("m{id}"), "body": body}]});
            let (sweeper, now) = (self.sweeper.clone(), EpochMillis(self.now));
            self.note(id, "sweeps an ended execution's event");
            let handle = spawn(
                id,
                &self.wire,
                async move { sweeper.sweep(&event, now).await },
            );
            self.ops.insert(
                id,
                Op::Sweep {
                    handle,
                    body,
                    receives: receives + 1,
                },
            );
            started = true;
        }
        let reconciler = Run::reconciler_id();
        if self.now >= self.next_reconcile && !self.ops.contains_key(&reconciler) {
            self.next_reconcile = self.now + super::run::reconcile_every(self.kind);
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
        self.runaways.struck.remove(&id);
        let (name, limit) = self.lock_of(id);
        let caller = &self.callers[id];
        let now = caller.clock(self.now);
        let event = caller.acquire_event(&name, limit, self.now);
        if caller.queued && matches!(caller.phase, Phase::Acquire) {
            self.tokens.open(&caller.token(self.now));
        }
        let cli = if caller.cli { ", the CLI" } else { "" };
        let text = format!(
            "{what} (clock {:+} ms, lease {} s{cli})",
            caller.skew, caller.lease
        );
        self.note(id, text);
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
        let landings_at_start = self.landings_besides(id);
        self.runaways.call_writes.remove(&id);
        self.runaways.call_documents.remove(&id);
        self.runaways.call_released_at.remove(&id);
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
                landings_at_start,
                started: self.now,
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
                self.check_not_asleep(id, &token)?;
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
    pub async fn check_kept(
        &mut self,
        id: usize,
        token: u64,
        expires_at: i64,
        what: &str,
    ) -> Result<(), Failure> {
        let owner = self.callers[id].owner.clone();
        // A grant an operator forced out may still reach its holder (a
        // hand-off's wake-up in flight): `release --force` warns of exactly this.
        let forced = self
            .forced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(owner, token));
        if expires_at <= self.now || forced {
            return Ok(());
        }
        let view = self.inspect(self.callers[id].lock).await;
        if checks::kept(&view, &self.callers[id].owner, token).is_none() {
            if self.runaways.struck.contains(&id) {
                // A release call of its that ran on freed the grant this
                // acquire made, before its answer came (DESIGN.md, "A
                // release call Step Functions gave up on"): forced out.
                let owner = self.callers[id].owner.clone();
                self.note(
                    id,
                    format!("its grant (token {token}) was freed by its own call that ran on"),
                );
                (self.forced.lock().unwrap_or_else(|p| p.into_inner())).push((owner, token));
                return Ok(());
            }
            return Err(self.fail(format!(
                "honest: c{id} was {what} token {token}, a grant the store does not keep"
            )));
        }
        Ok(())
    }
}
