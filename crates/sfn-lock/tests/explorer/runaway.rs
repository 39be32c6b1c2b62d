//! A release call Step Functions gave up on while its function ran on: the
//! Release Lock Task retries `Lambda.ClientExecutionTimeoutException` and
//! Lambda's service errors, which can come while the invocation still runs.
//! The caller's retry starts at once, and the old call goes on beside it,
//! under a wire identity of its own, until it ends or Lambda stops it at the
//! function's Timeout. A caller that takes the same lock again (a loop) may
//! then hold a new grant while its old release call still decides.

use std::collections::BTreeMap;

use sfn_lock::LockView;

use super::answers::RETRY_MS;
use super::checks;
use super::run::{Failure, Op, Run};

/// Wire identities of calls that run on: `RUNAWAYS + n`.
pub const RUNAWAYS: usize = 4_000;
/// release-lock's Timeout in template.yaml: Lambda stops the call then.
const RELEASE_TIMEOUT_MS: i64 = 26_000;

/// The calls that run on, by wire identity; the caller of every such
/// identity ever made; and the writes each caller's current call landed.
#[derive(Default)]
pub struct Runaways {
    pub calls: BTreeMap<usize, Runaway>,
    pub of: BTreeMap<usize, usize>,
    pub call_writes: BTreeMap<usize, usize>,
    /// Of those, the writes that freed the grant the caller believed it
    /// held (S3, SSM: its release record is in the document from then on).
    pub call_documents: BTreeMap<usize, usize>,
    /// Others' releases landed when the current call's freeing write did.
    pub call_released_at: BTreeMap<usize, usize>,
    /// Every lock's grants (owner, token) as read after the last landed write
    /// (`frees_owners_grant`).
    pub tokens: Vec<std::collections::BTreeSet<(String, u64)>>,
    /// Callers whose lock a call of theirs that ran on wrote unknowing
    /// since their current acquire began (its grant may be gone already).
    pub struck: std::collections::BTreeSet<usize>,
    /// Requests of release calls given up on, on their way: (wire id, seq).
    pub orphan_releases: std::collections::BTreeSet<(usize, u64)>,
    /// Callers whose later wait a call of their own that ran on removed
    /// from the queue, with that wait's bound: the waiter waits to it
    /// (DESIGN.md, "A release call Step Functions gave up on"), and its
    /// liveness counts from there.
    pub struck_waits: BTreeMap<usize, i64>,
}

pub struct Runaway {
    pub op: Op,
    /// Its writes that landed.
    pub writes: usize,
    /// Of those, the writes that freed its caller's grant (S3, SSM).
    pub documents: usize,
    /// Others' releases landed when its last freeing write did.
    pub released_at: Option<usize>,
    /// Others' writes that may have released the lock, by its last write.
    pub others_released: usize,
    /// It is slow (why Step Functions gave up): it sends nothing before this.
    pub resumes_at: i64,
    /// The grant its caller believed it held when Step Functions gave up.
    pub belief_at_start: Option<u64>,
    /// When Lambda stops it (its start plus the function's Timeout).
    pub stops_at: i64,
}

impl Run {
    /// Step Functions gives up on `id`'s running release call (any caller's
    /// when `None`) and retries it; whether one was given up on.
    pub fn run_away(&mut self, id: Option<usize>) -> bool {
        let running: Vec<usize> = (self.ops.iter())
            .filter(|(who, op)| {
                **who < self.callers.len()
                    && id.is_none_or(|id| id == **who)
                    // Step Functions' retries: not the CLI's.
                    && !self.callers[**who].cli
                    && matches!(op, Op::Release { .. })
                    // Not a withdraw: one that runs on can remove the
                    // caller's next wait (DESIGN.md, "Not explored").
                    && matches!(
                        self.callers[**who].phase,
                        super::callers::Phase::Release { withdraw: false }
                    )
                    && !op.is_finished()
            })
            .map(|(who, _)| *who)
            .collect();
        if running.is_empty() {
            return false;
        }
        let caller = running[self.draws.below(running.len() as u64) as usize];
        let Some(op) = self.ops.remove(&caller) else {
            return false;
        };
        let wire_id = RUNAWAYS + self.runaways.of.len();
        self.runaways.of.insert(wire_id, caller);
        self.wire.rename(caller, wire_id);
        // Its hand-offs are its own to wake, not the caller's next call's.
        for by in self.handed.by.values_mut().filter(|by| **by == caller) {
            *by = wire_id;
        }
        let unsent = std::mem::take(&mut self.handed.unsent);
        (self.handed.unsent).extend(unsent.into_iter().map(|(by, token)| match by == caller {
            true => (wire_id, token),
            false => (by, token),
        }));
        let started = match &op {
            Op::Release { started, .. } => *started,
            _ => self.now,
        };
        let stops_at = started + RELEASE_TIMEOUT_MS;
        let resumes_at = (self.now + 1000 * (3 + self.draws.below(18) as i64)).min(stops_at);
        self.runaways.calls.insert(
            wire_id,
            Runaway {
                op,
                // Its writes so far, landed before Step Functions gave up on it.
                writes: self.runaways.call_writes.remove(&caller).unwrap_or(0),
                documents: self.runaways.call_documents.remove(&caller).unwrap_or(0),
                released_at: self.runaways.call_released_at.remove(&caller),
                others_released: self.others_released(caller),
                belief_at_start: self.callers[caller].belief.map(|belief| belief.token),
                resumes_at,
                stops_at,
            },
        );
        // Its retry may find the grant this call freed: `not_held` (DESIGN.md).
        self.orphaned_releases.insert(caller);
        self.note(
            caller,
            "Step Functions gives up on its release call (ClientExecutionTimeout) and \
             retries; the call runs on",
        );
        self.callers[caller].ready_at = self.now + RETRY_MS;
        true
    }

    /// Calls that ran on and ended, or that Lambda stopped.
    pub async fn harvest_runaways(&mut self) {
        let due: Vec<usize> = (self.runaways.calls.iter())
            .filter(|(_, r)| r.op.is_finished() || self.now >= r.stops_at)
            .map(|(id, _)| *id)
            .collect();
        for wire_id in due {
            let Some(runaway) = self.runaways.calls.remove(&wire_id) else {
                continue;
            };
            if !runaway.op.is_finished() {
                runaway.op.abort();
                // What it had sent is on its way, and may still land; what
                // it held back while slow was never sent.
                let (mine, rest): (Vec<_>, Vec<_>) =
                    (self.wire.take_all().into_iter()).partition(|parked| parked.caller == wire_id);
                self.wire.put_back(rest);
                let sent = runaway.resumes_at <= self.now;
                for parked in mine.into_iter().filter(|_| sent) {
                    (self.runaways.orphan_releases).insert((parked.caller, parked.seq));
                    self.orphans.push(parked.detached());
                }
                self.note(wire_id, "Lambda stops the call at the function's Timeout");
                continue;
            }
            let text = match runaway.op {
                Op::Release { handle, .. } => match handle.await {
                    Ok(Ok(response)) => format!("answered {} (nobody hears)", response.outcome),
                    Ok(Err(error)) => format!("failed: {}", error.error_type()),
                    Err(_) => "died".into(),
                },
                _ => "ended".into(),
            };
            self.note(wire_id, format!("the call that ran on {text}"));
        }
    }

    /// Takes out of `parked` the requests of calls still slow, back onto the wire.
    pub fn hold_back(&self, parked: &mut Vec<super::wire::Parked>) {
        let slow =
            |who: &usize| (self.runaways.calls.get(who)).is_some_and(|r| r.resumes_at > self.now);
        let (held, offered): (Vec<_>, Vec<_>) = std::mem::take(parked)
            .into_iter()
            .partition(|p| slow(&p.caller));
        *parked = offered;
        self.wire.put_back(held);
    }

    /// Counts a landed write of `who` that changed the store (its answer,
    /// as `carry_out` told it, a 2xx): whether it is a write of a call that
    /// ran on which cannot know its own earlier release (its first, or on
    /// DynamoDB one after another release overwrote the lock's record).
    pub fn runaway_wrote(&mut self, who: usize, answer: &str, frees: bool, orphan: bool) -> bool {
        if !changed(answer) {
            return false;
        }
        let caller = self.caller_of(who);
        let others_released = self.others_released(caller);
        // DynamoDB keeps one release record per lock: another release since
        // the call's last write may have overwritten its own (DESIGN.md).
        let one_record = self.kind == super::stores::Kind::DynamoDb;
        let believed = (self.callers.get(caller)).and_then(|c| c.belief.map(|belief| belief.token));
        match self.runaways.calls.get_mut(&who) {
            Some(runaway) => {
                runaway.writes += 1;
                // Its own release record, once written (a write that freed
                // the grant; a confirmation writes none), is what a fresh
                // read finds first (`decide_release`): no excuse after it.
                // S3 and SSM keep the last RELEASE_RECORDS release records:
                // once as many others landed, its own may be gone.
                let record_gone = runaway.released_at.is_some_and(|at| {
                    others_released >= at + sfn_lock::store::document::doc::RELEASE_RECORDS
                });
                let first_document = frees && (runaway.documents == 0 || record_gone);
                runaway.documents += usize::from(frees);
                if frees {
                    runaway.released_at = Some(others_released);
                }
                let overwritten = one_record && others_released > runaway.others_released;
                runaway.others_released = others_released;
                // On S3 and SSM a call that reads the lock afresh after its
                // owner took it again finds that grant as its own (DESIGN.md).
                let regranted = !one_record
                    && first_document
                    && believed.is_some()
                    && believed != runaway.belief_at_start;
                runaway.writes == 1 || overwritten || regranted
            }
            // A late request of an earlier call is not the current call's.
            None if orphan => false,
            None => {
                *self.runaways.call_writes.entry(who).or_default() += 1;
                *self.runaways.call_documents.entry(who).or_default() += usize::from(frees);
                if frees {
                    self.runaways.call_released_at.insert(who, others_released);
                }
                false
            }
        }
    }

    /// After `who`'s write removed a queue entry of `lock`'s: if `who` is a
    /// call of a caller's that ran on, and that caller waits in the queue
    /// without a grant, the entry was its later wait (DESIGN.md, "A release
    /// call Step Functions gave up on"): it waits to its bound, and liveness
    /// counts from there.
    pub fn strike_wait(&mut self, who: usize, lock: usize, entry: &str, view: &LockView) {
        let caller = self.caller_of(who);
        let Some(c) = (self.callers.get(caller)).filter(|c| who != caller && c.lock == lock) else {
            return;
        };
        let super::callers::Phase::Queued { deadline, .. } = &c.phase else {
            return;
        };
        let (Ok(name), Ok(owner)) = (
            sfn_lock::LockName::new(self.locks[lock].0.as_str()),
            sfn_lock::Owner::new(c.owner.as_str()),
        ) else {
            return;
        };
        // Its own entry, and no grant of its own (not a hand-off to it).
        if entry != sfn_lock::store::dynamodb::queue::entry_name(&name, &owner)
            || view
                .grants
                .iter()
                .any(|grant| grant.owner == c.owner.as_str())
        {
            return;
        }
        let deadline = *deadline;
        if self.runaways.struck_waits.insert(caller, deadline) != Some(deadline) {
            self.note(who, format!("removed c{caller}'s later wait: c{caller} waits to its bound (DESIGN.md, \"A release call Step Functions gave up on\")"));
        }
    }

    /// After `who`'s write landed: `checks::held`, but for the case DESIGN.md
    /// documents ("A release call Step Functions gave up on"): a write of a
    /// release call that ran on, which cannot know its own earlier release
    /// ([`Run::runaway_wrote`]), frees its owner's later grant. That grant
    /// stops counting, as a forced-out one does: its holder is not told. Any
    /// other write of that call (it should have found its own release
    /// record) is not excused.
    pub fn check_held(
        &mut self,
        who: usize,
        unknowing: bool,
        lock: usize,
        view: &LockView,
    ) -> Result<(), Failure> {
        let caller = self.caller_of(who);
        if unknowing && self.callers[caller].lock == lock {
            self.runaways.struck.insert(caller);
            let owner = self.callers[caller].owner.clone();
            // The grant it works under, or the one handed to its waiting task.
            let handed = match &self.callers[caller].phase {
                super::callers::Phase::Queued { token, .. } => {
                    self.handed.seen.get(token).map(|(_, _, granted)| *granted)
                }
                _ => None,
            };
            let grant = (self.callers[caller].believes_live(self.now))
                .map(|belief| belief.token)
                .or(handed);
            if let Some(token) = grant.filter(|t| checks::kept(view, &owner, *t).is_none()) {
                self.note(
                    who,
                    format!("freed c{caller}'s later grant (token {token}): DESIGN.md, \"A release call Step Functions gave up on\""),
                );
                (self.forced.lock().unwrap_or_else(|p| p.into_inner())).push((owner, token));
            }
        }
        // Forced out, or being forced out (confirmed once gone).
        let mut forced = (self.forced.lock().unwrap_or_else(|p| p.into_inner())).clone();
        forced.extend(
            (self.force_targets.lock().unwrap_or_else(|p| p.into_inner()))
                .iter()
                .map(|(_, owner, token)| (owner.clone(), *token)),
        );
        checks::held(&self.callers, &forced, lock, view, self.now).map_err(|e| self.fail(e))
    }

    /// Writes that may have released the lock besides `caller`'s own: other
    /// callers' releases, and the sweep's, the reconciler's and an operator's.
    fn others_released(&self, caller: usize) -> usize {
        let (system, releases, _) = self.landings_besides(caller);
        system + releases
    }

    /// The caller a wire identity's requests are for.
    pub fn caller_of(&self, who: usize) -> usize {
        self.runaways.of.get(&who).copied().unwrap_or(who)
    }

    /// The operation a wire identity's requests are for.
    pub fn op_of(&self, who: usize) -> Option<&Op> {
        (self.ops.get(&who)).or_else(|| self.runaways.calls.get(&who).map(|r| &r.op))
    }
}

impl Run {
    /// Whether a grant of `who`'s caller's owner was in the store before
    /// this write and is gone after it (`views`, one per lock), and
    /// remembers every lock's grants for the next landed write.
    pub fn frees_owners_grant(&mut self, who: usize, views: &[LockView]) -> bool {
        let caller = self.caller_of(who);
        let after: Vec<std::collections::BTreeSet<(String, u64)>> = (views.iter())
            .map(|view| {
                (view.grants.iter())
                    .map(|grant| (grant.owner.clone(), grant.fencing_token))
                    .collect()
            })
            .collect();
        let before = std::mem::replace(&mut self.runaways.tokens, after);
        let Some(c) = self.callers.get(caller) else {
            return false;
        };
        // Any grant of its owner's (a release frees them all), believed or not.
        let now = &self.runaways.tokens[c.lock];
        (before.get(c.lock))
            .is_some_and(|was| (was.iter()).any(|grant| grant.0 == c.owner && !now.contains(grant)))
    }
}

/// Whether a landed request's answer, as `carry_out` told it, is a 2xx.
pub fn changed(answer: &str) -> bool {
    let status = answer
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| s.len() == 3);
    status.is_some_and(|status| status.starts_with('2'))
}
