//! One step's mechanics: delivering a parked request with its fate, waiting
//! for every caller to settle, moving the store's clock, reading the store.

use std::time::Duration;

use serde_json::Value;

use super::fates::{carry_out, Fate};
use super::ports::MACHINE;
use super::run::{Failure, Run, RECONCILER};
use super::stores::Kind;

/// The condition of DynamoDB's queue-entry removal (`store/dynamodb/queue.rs`);
/// a hand-off's conditions contain it too, among more.
const DROP_ENTRY: &str = "#entry = :seq";

/// The queue entry a DynamoDB removal of one names.
fn dropped_entry(body: &[u8]) -> Option<String> {
    let request: Value = serde_json::from_slice(body).ok()?;
    if request["ConditionExpression"].as_str() != Some(DROP_ENTRY) {
        return None;
    }
    request["ExpressionAttributeNames"]["#entry"]
        .as_str()
        .map(str::to_owned)
}

impl Run {
    pub async fn deliver(
        &mut self,
        parked: super::wire::Parked,
        fate: Fate,
    ) -> Result<(), Failure> {
        let (who, label, writes) = (parked.caller, parked.label(), parked.writes());
        let (orphan, seq) = (parked.orphan, parked.seq);
        // DynamoDB's removal of a queue entry (`drop_entry`: a withdraw, or a
        // pump dropping an entry it cannot hand off to): the entry it names.
        let dropped_entry = dropped_entry(&parked.body);
        let writes_document = parked.writes_document();
        if parked.is_sfn() && !fate.lands() {
            if let Some(token) = parked.task_token() {
                self.handed.unsent.insert((who, token));
            }
        }
        if matches!(fate, Fate::CrashBefore | Fate::CrashAfter | Fate::LandsLate) {
            if let Some(op) = self.op_of(who) {
                op.abort();
            }
        }
        let releasing = match orphan {
            true => self.runaways.orphan_releases.contains(&(who, seq)),
            false => matches!(self.op_of(who), Some(super::ops::Op::Release { .. })),
        };
        if fate == Fate::LandsLate {
            if releasing {
                self.orphaned_releases.insert(self.caller_of(who));
                self.runaways.orphan_releases.insert((who, seq));
            }
            self.note(
                who,
                format!("{label}: the function gives up on it (timeout); it lands later"),
            );
            self.orphans.push(parked.detached());
            return Ok(());
        }
        if fate.lands() {
            self.stats.requests += 1;
            if who >= RECONCILER && writes {
                self.system_landings += 1;
            }
            if writes && releasing {
                *self
                    .release_landings
                    .entry(self.caller_of(who))
                    .or_default() += 1;
            }
            if fate == Fate::AnswerLost {
                *self.lost_answers.entry(who).or_default() += 1;
            }
            if self.kind == Kind::Ssm {
                self.sync_ssm_clock();
            }
        }
        let now = self.now;
        let answer = carry_out(
            parked,
            fate,
            now,
            &mut self.tokens,
            &mut self.continuations,
            &mut self.draws,
        );
        let crash = match fate {
            Fate::CrashBefore | Fate::CrashAfter => "; the caller's process dies",
            _ => "",
        };
        self.note(who, format!("{label}: {answer}{crash}"));
        // A blind DynamoDB write of a release call given up on cannot know it either.
        let blind = orphan && releasing && self.kind == Kind::DynamoDb;
        if fate.lands() && writes {
            let mut views = Vec::with_capacity(self.locks.len());
            for lock in 0..self.locks.len() {
                views.push(self.inspect(lock).await);
            }
            // A write of the lock's document that freed a grant of its
            // caller's owner: a release, not a confirmation.
            let freed = self.frees_owners_grant(who, &views);
            let frees = writes_document && freed;
            let unknowing = self.runaway_wrote(who, &answer, frees, orphan) || blind;
            for (lock, view) in views.into_iter().enumerate() {
                self.rising.rise(lock, &view).map_err(|e| self.fail(e))?;
                self.check_held(who, unknowing, lock, &view)?;
                if let Some(entry) = dropped_entry.as_deref() {
                    if super::runaway::changed(&answer) {
                        self.strike_wait(who, lock, entry, &view);
                    }
                }
                self.note_handed(who, orphan, lock, &view);
            }
        }
        // A release whose write landed unheard: Step Functions may give up
        // on the call while it runs on (the SDK's retry still to come).
        if fate == Fate::AnswerLost && releasing && writes && self.draws.chance(70) {
            self.run_away(Some(who));
        }
        Ok(())
    }

    /// Waits until every operation waits on the wire or has finished.
    /// The runtime's clock is paused: a pause inside the library (the
    /// waker's) passes at once, and a cancelled operation is seen at the next tick.
    pub async fn settle(&mut self) -> Result<(), Failure> {
        for _ in 0..100_000 {
            let parked = self.wire.parked_callers();
            let settled =
                |(id, op): (&usize, &super::ops::Op)| op.is_finished() || parked.contains(id);
            if self.ops.iter().all(settled)
                && (self.runaways.calls.iter()).all(|(id, r)| settled((id, &r.op)))
            {
                return Ok(());
            }
            tokio::select! {
                _ = self.wire.bell.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        Err(self.fail("stuck: an operation waits on something other than the store".into()))
    }

    pub fn advance_to(&mut self, at: i64) {
        if at > self.now {
            self.now = at;
            if self.kind == Kind::Ssm {
                self.sync_ssm_clock();
            }
        }
    }

    /// Puts moto's SSM clock (LastModifiedDate) at the store's virtual time.
    fn sync_ssm_clock(&self) {
        let ahead = (self.now - sfn_lock::EpochMillis::now().0) as f64 / 1000.0;
        let endpoint = std::env::var("AWS_ENDPOINT_URL_SSM")
            .or_else(|_| std::env::var("AWS_ENDPOINT_URL_DYNAMODB"))
            .unwrap_or_else(|_| {
                panic!("AWS_ENDPOINT_URL_SSM is not set: run under scripts/local-stack.sh")
            });
        if let Err(error) = ureq::post(&format!("{endpoint}/_sfn_lock/ssm-clock"))
            .send_string(&format!("{ahead:.3}"))
        {
            panic!("setting SSM's clock: {error}");
        }
    }

    pub async fn inspect(&self, lock: usize) -> sfn_lock::LockView {
        use sfn_lock::LockStore;
        match self.direct.inspect(&self.locks[lock].0).await {
            Ok(view) => view,
            Err(error) => panic!("the explorer's own read failed: {error}"),
        }
    }

    pub fn lock_of(&self, caller: usize) -> (String, u32) {
        let (name, limit) = &self.locks[self.callers[caller].lock];
        (name.to_string(), *limit)
    }

    /// Writes landed so far: (sweep, reconciler or operator; releases of
    /// callers other than `id`), and the answers `id` lost.
    pub fn landings_besides(&self, id: usize) -> (usize, usize, usize) {
        let others = self
            .release_landings
            .iter()
            .filter(|(who, _)| **who != id)
            .map(|(_, n)| n)
            .sum();
        let lost = self.lost_answers.get(&id).copied().unwrap_or(0);
        (self.system_landings, others, lost)
    }

    pub fn sweep_event(owner: &str, status: &str) -> Value {
        serde_json::json!({
            "version": "0", "id": "explored", "account": "123456789012", "region": "us-east-1",
            "time": "2026-12-03T00:00:00Z", "resources": [], "source": "aws.states",
            "detail-type": "Step Functions Execution Status Change",
            "detail": {"executionArn": owner, "stateMachineArn": MACHINE, "status": status}
        })
    }
}
