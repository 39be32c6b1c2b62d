//! What happens around the callers: executions that end (their events to
//! the sweep, best effort), an operator's forced release, the timers, and
//! running an operation as a caller.

use sfn_lock::{EpochMillis, LockError};

use super::callers::Phase;
use super::run::{Op, Run, OPERATOR};
use super::wire::CALLER;

impl Run {
    /// An execution ends with no Catch (aborted, timed out): a workload it
    /// started runs on; its ended event reaches the sweep, or is lost.
    pub fn abort_one(&mut self) {
        // A CLI process is killed between its operations (one that dies
        // within a request is a crash fate, `fates.rs`).
        let alive: Vec<usize> = (0..self.callers.len())
            .filter(|id| !self.callers[*id].is_done())
            .filter(|id| !self.callers[*id].cli || !self.ops.contains_key(id))
            .collect();
        if alive.is_empty() {
            return;
        }
        let id = alive[self.draws.below(alive.len() as u64) as usize];
        let now = self.now;
        if self.callers[id].cli {
            // A killed process: no execution ends, no event, nothing swept.
            let caller = &mut self.callers[id];
            if let Phase::Work { until, .. } = caller.phase {
                caller.runs_until = Some(until);
            }
            caller.aborted = true;
            caller.phase = Phase::Done("killed");
            self.note(id, "its process is killed");
            return;
        }
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
        self.note(id, "its execution is aborted (no Catch)");
        self.ended(id, "ABORTED");
    }

    /// Every execution's end is an EventBridge event the sweep gets (the
    /// template's rule takes every terminal status), best effort: lost one
    /// time in five.
    pub fn ended(&mut self, id: usize, status: &str) {
        let now = self.now;
        let owner = self.callers[id].owner.clone();
        if self.callers[id].cli {
            // A CLI process exits: no execution, no event.
            return;
        }
        if self.callers[id].queued {
            // Its execution is over: so is any task still waiting on a token.
            let token = self.callers[id].token(now);
            self.tokens.close(&token);
        }
        self.world.end(&owner, EpochMillis(now));
        if self.draws.chance(20) {
            self.note(id, format!("its {status} event is lost"));
            return;
        }
        let body = Run::sweep_event(&owner, status).to_string();
        self.sweeps_due
            .push((now + 1000 * self.draws.below(10) as i64, body, 0));
    }

    /// An operator frees a lock by hand, as `sfn-lock release --force` does.
    pub fn force_release(&mut self) {
        use sfn_lock::{LockStore, Owner, ReleaseOutcome};
        let lock = self.draws.below(self.locks.len() as u64) as usize;
        let name = self.locks[lock].0.clone();
        let (sweeper, forced, now) = (
            self.sweeper.clone(),
            self.force_targets.clone(),
            EpochMillis(self.now),
        );
        self.note(OPERATOR, format!("forces lock {lock} free"));
        let op = spawn(OPERATOR, &self.wire, async move {
            let view = sweeper.store.inspect(&name).await?;
            let mut freed = 0;
            for grant in view.grants {
                let holder = Owner::new(grant.owner.clone())?;
                forced.lock().unwrap_or_else(|p| p.into_inner()).push((
                    lock,
                    grant.owner.clone(),
                    grant.fencing_token,
                ));
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
        let mut due: Vec<i64> = self.sweeps_due.iter().map(|(at, _, _)| *at).collect();
        for caller in &self.callers {
            match &caller.phase {
                Phase::Acquire | Phase::Release { .. } => due.push(caller.ready_at),
                Phase::Queued { deadline, .. } => due.push(*deadline),
                Phase::Work { until, .. } => due.push(*until),
                Phase::Done(_) => {}
            }
        }
        for runaway in self.runaways.calls.values() {
            due.push(runaway.stops_at);
            if runaway.resumes_at > self.now {
                due.push(runaway.resumes_at);
            }
        }
        due.extend(self.pauses.next_due(self.now));
        if due.is_empty() && self.ops.is_empty() {
            return None;
        }
        due.push(self.next_reconcile);
        // What is due already waits on a paused process (`pauses.rs`): time
        // goes on to the next thing due later.
        let later = due.into_iter().filter(|at| *at > self.now).min();
        Some(later.unwrap_or(self.now + 1))
    }

    /// The callers not done, but for one whose wait its own call that ran
    /// on removed, until `bound` after that wait's own bound.
    pub fn still_waiting(&self, bound: i64) -> String {
        let excused = |id: usize| {
            (self.runaways.struck_waits.get(&id)).is_some_and(|until| self.now - until <= bound)
        };
        self.callers
            .iter()
            .filter(|c| !c.is_done() && !excused(c.id))
            .map(|c| format!("c{} {:?}", c.id, c.phase))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs `work` as caller `id`: its requests are parked under that name, and
/// the scheduler hears when it ends.
pub fn spawn<T: Send + 'static>(
    id: usize,
    wire: &super::wire::Wire,
    work: impl std::future::Future<Output = Result<T, LockError>> + Send + 'static,
) -> super::run::Answered<T> {
    let bell = wire.bell.clone();
    tokio::spawn(CALLER.scope(wire.identity(id), async move {
        let answer = work.await;
        bell.notify_one();
        answer
    }))
}
