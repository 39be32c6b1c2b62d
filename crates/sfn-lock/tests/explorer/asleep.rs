//! Waiters the lock was handed to must be woken (DESIGN.md, "Every hand-off
//! is recognisable, and every owed wake-up is sent again"): the call that
//! wrote a hand-off wakes its waiter before it answers, unless its own
//! wake-up did not land (then the marker has the next pump send it again);
//! and no waiter sleeps on a handed grant past the bound (the next pump, at
//! the latest the reconciler), stalls aside (a paused pump is no excuse:
//! the next pump sends what it owes).

use super::callers::Phase;
use super::run::{Failure, Run, RECONCILE_EVERY_MS};
use super::tokens::Task;

/// How long, outside stalls, a waiter may sleep on a grant handed to it:
/// three reconciler periods (a run's own faults may cost it one or two).
const ASLEEP_BOUND_MS: i64 = 3 * RECONCILE_EVERY_MS;

/// What the explorer saw of hand-offs, per task token.
#[derive(Debug, Default)]
pub struct Handed {
    /// Seen waiting while its owner held nothing on the lock.
    unheld: std::collections::BTreeSet<String>,
    /// Seen holding while its task still waited: when, the stalls' total
    /// then, and the grant's token.
    pub seen: std::collections::BTreeMap<String, (i64, i64, u64)>,
    /// The operation whose landed write made it hold (the hand-off's pump).
    pub by: std::collections::BTreeMap<String, usize>,
    /// (operation, task token): a `SendTaskSuccess` of it that did not land.
    pub unsent: std::collections::BTreeSet<(usize, String)>,
    /// Store time passed in stalls (nothing moves then: no pump, no reconciler).
    pub stalled_ms: i64,
}

impl Run {
    /// After `who`'s write landed: queued callers whose task still waits
    /// while `view` shows them holding were handed the lock. `orphan`: the
    /// write was one its function had given up on (no call to hold to it).
    pub fn note_handed(
        &mut self,
        who: usize,
        orphan: bool,
        lock: usize,
        view: &sfn_lock::LockView,
    ) {
        let handed = &mut self.handed;
        for caller in self.callers.iter().filter(|caller| caller.lock == lock) {
            let Phase::Queued { token, .. } = &caller.phase else {
                continue;
            };
            if self.tokens.state(token) != Some(&Task::Waiting) || handed.seen.contains_key(token) {
                continue;
            }
            let Some(grant) = view.grants.iter().find(|grant| grant.owner == caller.owner) else {
                handed.unheld.insert(token.clone());
                continue;
            };
            // Expired as it landed: only a stall moves time so far within
            // one call (Lambda's Timeout would have stopped it), and the
            // next pump may take it back. Liveness still holds the waiter.
            if handed.unheld.contains(token) && grant.expires_at.0 < self.now {
                continue;
            }
            if handed.unheld.contains(token) && !orphan {
                handed.by.insert(token.clone(), who);
            }
            let seen = (self.now, handed.stalled_ms, grant.fencing_token);
            handed.seen.insert(token.clone(), seen);
        }
    }

    /// Operation `op` ended (`answered`: with an answer, not an error or a
    /// crash): a waiter it handed the lock to is woken, unless its wake-up
    /// did not land or the grant went back.
    pub async fn check_woken(&mut self, op: usize, answered: bool) -> Result<(), Failure> {
        let owed: Vec<String> = (self.handed.by.iter())
            .filter(|(_, by)| **by == op)
            .map(|(token, _)| token.clone())
            .collect();
        for token in owed {
            self.handed.by.remove(&token);
            let unsent = self.handed.unsent.contains(&(op, token.clone()));
            if !answered || unsent || self.tokens.state(&token) != Some(&Task::Waiting) {
                continue;
            }
            let waiting =
                |phase: &Phase| matches!(phase, Phase::Queued { token: t, .. } if *t == token);
            let Some(caller) = self.callers.iter().find(|caller| waiting(&caller.phase)) else {
                continue;
            };
            let (id, lock, owner) = (caller.id, caller.lock, caller.owner.clone());
            let view = self.inspect(lock).await;
            if view.grants.iter().any(|grant| grant.owner == owner) {
                self.note(op, "answered");
                return Err(self.fail(format!(
                    "asleep: a call handed the lock to c{id} and answered without waking it \
                     (its wake-up did not fail: nothing will send it again)"
                )));
            }
        }
        Ok(())
    }

    /// `id`'s queued task (`token`) times out: if the lock had been handed
    /// to it, longer ago than the bound outside stalls, no wake-up came.
    /// A grant an operator forced out is nobody's to wake (`release --force`).
    pub fn check_not_asleep(&mut self, id: usize, token: &str) -> Result<(), Failure> {
        let Some((at, stalled_at, granted)) = self.handed.seen.get(token).copied() else {
            return Ok(());
        };
        let owner = self.callers[id].owner.clone();
        let forced =
            (self.forced.lock().unwrap_or_else(|p| p.into_inner())).contains(&(owner, granted));
        if forced {
            return Ok(());
        }
        let asleep = self.now - at - (self.handed.stalled_ms - stalled_at);
        if asleep <= ASLEEP_BOUND_MS {
            return Ok(());
        }
        Err(self.fail(format!(
            "asleep: c{id}'s queued task timed out {:.0} s (stalls aside) after the lock was \
             handed to it at t+{:.0}s; no wake-up reached it",
            asleep as f64 / 1000.0,
            (at - self.start) as f64 / 1000.0
        )))
    }
}
