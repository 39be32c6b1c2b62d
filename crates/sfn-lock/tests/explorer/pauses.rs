//! A CLI caller's process pauses just before it sends one request (a
//! laptop that sleeps under `sfn-lock run`, a paused VM): the request stays parked, is not offered to the scheduler until
//! the store's clock reaches the end of the pause, while every other caller
//! goes on. Unlike a stall (`run.rs`), the rest of the world moves meanwhile:
//! this is how a writer comes to land after the store moved on (DESIGN.md,
//! "SSM store", "The write window"), and a hint (`current`) after its
//! generation was trimmed.

use std::collections::BTreeMap;

use super::fates::Fate;
use super::run::{Failure, Run, FAULT_STEPS};
use super::wire::Parked;

/// A stall (`run.rs`), or a pause: how far the store's clock moves while the parked requests wait.
pub const STALLS_MS: [i64; 7] = [
    5_000, 40_000, 180_000, 360_000, 1_200_000, 7_200_000, 86_400_000,
];

#[derive(Debug, Default)]
pub struct Pauses {
    /// (caller, request seq) → the store time its process resumes and sends it.
    due: BTreeMap<(usize, u64), i64>,
    /// The latest a pause ends: liveness counts from there too.
    pub last_due: i64,
    /// Scheduler turns taken while a process was paused (others' steps, time
    /// moving to the reconciler's next minute): they do not use up the
    /// faults' steps, so the world a paused process resumes into is still a
    /// faulty one.
    pub steps_paused: usize,
}

/// At most this many steps are added to the faults' (`run.rs` ends a run
/// after `MAX_STEPS`).
const MAX_STEPS_PAUSED: usize = 300;

impl Pauses {
    /// When the next paused process resumes.
    pub fn next_due(&self, now: i64) -> Option<i64> {
        self.due.values().copied().filter(|at| *at > now).min()
    }
}

impl Run {
    /// Whether faults are still drawn: for `FAULT_STEPS` steps, not counting
    /// those taken while a process was paused.
    pub fn faulty(&self) -> bool {
        self.stats.steps < FAULT_STEPS + self.pauses.steps_paused
    }

    /// The parked requests the scheduler may pick: those of processes still
    /// paused stay on the wire (their callers wait there, as far as
    /// `settle` is concerned), unseen.
    pub fn offered(&mut self) -> Vec<Parked> {
        let now = self.now;
        // Only while faults are drawn: once they stop, they stay stopped.
        if self.faulty() && self.pauses.next_due(now).is_some() {
            self.pauses.steps_paused = (self.pauses.steps_paused + 1).min(MAX_STEPS_PAUSED);
        }
        let (paused, offered): (Vec<Parked>, Vec<Parked>) =
            self.wire.take_all().into_iter().partition(|parked| {
                (self.pauses.due.get(&(parked.caller, parked.seq))).is_some_and(|at| *at > now)
            });
        self.wire.put_back(paused);
        offered
    }

    /// Carries out `fate`; a pause parks the request again until it ends.
    /// Only CLI callers' processes pause (a Lambda invocation, the sweep's
    /// and the reconciler's included, ends at its Timeout, and their periods
    /// are what the `asleep` bound rests on), and a request at most once (it
    /// is sent when its process resumes).
    pub async fn dispatch(&mut self, parked: Parked, fate: Fate) -> Result<(), Failure> {
        let key = (parked.caller, parked.seq);
        if self.pauses.due.contains_key(&key) {
            // Sent as its process resumes: what the pause was for is that it
            // lands late (faults on a request are other schedules' business).
            return self.deliver(parked, Fate::Land).await;
        }
        // The search leans on the writes a pause matters most before: an SSM
        // generation's create (the write window) and its hint.
        let lean = self.faulty() && lock_write(&parked);
        let fate = if fate == Fate::Land && lean && self.draws.chance(self.profile.pauses) {
            Fate::Paused
        } else {
            fate
        };
        if fate != Fate::Paused {
            return self.deliver(parked, fate).await;
        }
        let cli = self
            .callers
            .get(parked.caller)
            .is_some_and(|caller| caller.cli);
        if !cli || parked.orphan {
            return self.deliver(parked, Fate::Land).await;
        }
        // Minutes, mostly: long enough for the store to move on (the write
        // window is 2 min, the trimming 5 to 7), short enough that a long
        // lease drawn before it is still live when the request lands. Not a
        // day: the reconciler would run 1,440 times meanwhile (a day passes
        // in a stall instead, `run.rs`).
        let pause = match self.draws.below(4) {
            0 => STALLS_MS[1 + self.draws.below(STALLS_MS.len() as u64 - 2) as usize],
            1 => STALLS_MS[3],
            _ => STALLS_MS[4],
        };
        let due = self.now + pause;
        self.pauses.due.insert(key, due);
        self.pauses.last_due = self.pauses.last_due.max(due);
        let label = parked.label();
        self.note(
            parked.caller,
            format!(
                "{label}: its process pauses {} s before sending it",
                pause / 1000
            ),
        );
        self.wire.put_back(vec![parked]);
        Ok(())
    }
}

/// An SSM `PutParameter` of a lock's generation (landing late, it may
/// re-make one trimmed meanwhile) or of its `current` hint (landing late, it
/// may point behind generations trimmed meanwhile). A pause before a read
/// is no stall of the write: the write reads again after it.
fn lock_write(parked: &Parked) -> bool {
    if parked.target() != Some("AmazonSSM.PutParameter") {
        return false;
    }
    let body: serde_json::Value = serde_json::from_slice(&parked.body).unwrap_or_default();
    let name = body["Name"].as_str().unwrap_or_default();
    let last = name.rsplit('/').next().unwrap_or_default();
    !name.contains("/.owners/")
        && (last == "current" || (last.len() == 20 && last.bytes().all(|b| b.is_ascii_digit())))
}
