//! The callers: executions of the shipped state machines as the library sees
//! them (acquire, wait or queue, work, release; Step Functions' retries and
//! Catch), each drawn from the seed: which lock, polling or queued, lease,
//! wait bound, work time, renewals, clock skew.

use serde_json::{json, Value};
use sfn_lock::EpochMillis;

use super::draws::Draws;
use super::profile::Profile;

/// Most a caller's clock is off the store's, either way. The limit invariant
/// counts a grant as live only while it has this much left: within it, a
/// caller whose clock runs ahead may judge a grant expired early, which the
/// design accepts (DESIGN.md, "Clocks").
pub const SKEW_BOUND_MS: i64 = 1_000;
/// How long a polling caller waits between attempts (the ASL's Wait state).
pub const POLL_SECONDS: i64 = 20;
/// Step Functions retries a failed acquire this many times, then the Catch releases.
pub const ACQUIRE_RETRIES: u32 = 3;
/// The sweep's grace: the longest workload (WorkloadMaxRunSeconds), which
/// the deployment must keep at least as long as any workload runs on after
/// its execution ended: here the longest work a caller draws (90 s).
pub const GRACE_SECONDS: i64 = 90;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Asks for the lock when its time comes.
    Acquire,
    /// Queued: waits on its task token until `deadline`.
    Queued {
        token: String,
        deadline: i64,
    },
    /// Holds the lock (as far as it knows) and works until `until`.
    Work {
        until: i64,
        renewed: bool,
    },
    /// Releases, or withdraws from the queue.
    Release {
        withdraw: bool,
    },
    Done(&'static str),
}

/// What a caller believes it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Belief {
    pub token: u64,
    pub expires_at: i64,
}

#[derive(Clone, Debug)]
pub struct Caller {
    pub id: usize,
    pub owner: String,
    /// A process of its own (`sfn-lock run`), not an execution: nothing
    /// sweeps it; killed, its grant lasts until its lease ends.
    pub cli: bool,
    pub lock: usize,
    pub queued: bool,
    pub lease: i64,
    pub wait: Option<i64>,
    pub work: i64,
    pub renews: bool,
    pub skew: i64,
    pub phase: Phase,
    pub ready_at: i64,
    pub wait_started: i64,
    pub failures: u32,
    pub tokens_used: u32,
    pub belief: Option<Belief>,
    /// Its execution ended without a Catch; a workload it started runs on until this.
    pub aborted: bool,
    pub runs_until: Option<i64>,
    /// Locked sections still to run after this one: an execution that takes
    /// the same lock again (a loop), under the same owner.
    pub cycles_left: u32,
}

impl Caller {
    pub fn draw(
        id: usize,
        run: &str,
        (start, locks, queues): (i64, usize, bool),
        profile: &Profile,
        draws: &mut Draws,
    ) -> Self {
        let lease = profile.lease(draws);
        // Only a process of its own can pause for minutes (a laptop asleep
        // under the CLI, a paused VM): a Lambda invocation ends at its
        // Timeout. So pauses are drawn only for CLI callers (`pauses.rs`).
        let cli = profile.pauses > 0 && draws.chance(50);
        // A CLI run of a long job: its grant outlives a pause of its process.
        let lease = if cli && profile.long_leases {
            1500
        } else {
            lease
        };
        let owner = match cli {
            true => format!("cli:explored:{run}-c{id}"),
            false => {
                format!("arn:aws:states:us-east-1:123456789012:execution:explored:{run}-c{id}")
            }
        };
        Caller {
            id,
            owner,
            cli,
            lock: draws.below(locks as u64) as usize,
            // The CLI has no task token to wait on: it polls.
            queued: !cli && queues && draws.chance(50),
            lease,
            wait: [None, Some(120), Some(600)][draws.below(3) as usize],
            // A workload never outlives its lease in the shipped machines,
            // nor the sweep's grace (GRACE_SECONDS).
            work: [20, lease / 2, lease * 3 / 4][draws.below(3) as usize].min(GRACE_SECONDS),
            renews: draws.chance(30),
            skew: skew(draws.below(2 * SKEW_BOUND_MS as u64 + 1) as i64),
            phase: Phase::Acquire,
            ready_at: start + 1000 * draws.below(10) as i64,
            wait_started: start,
            failures: 0,
            tokens_used: 0,
            belief: None,
            aborted: false,
            runs_until: None,
            cycles_left: profile.cycles(draws),
        }
    }

    pub fn clock(&self, store_now: i64) -> EpochMillis {
        EpochMillis(store_now + self.skew)
    }

    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// Whether it believes it holds a grant live by the store's clock, with
    /// the skew bound to spare.
    pub fn believes_live(&self, store_now: i64) -> Option<Belief> {
        let belief = self.belief?;
        let working = matches!(self.phase, Phase::Work { .. })
            || self.runs_until.is_some_and(|until| until > store_now);
        (working && belief.expires_at > store_now + SKEW_BOUND_MS).then_some(belief)
    }

    pub fn acquire_event(&self, lock_name: &str, limit: u32, now: i64) -> Value {
        let mut event = json!({
            "lockName": lock_name,
            "owner": self.owner,
            "leaseSeconds": self.lease,
            "limit": limit,
        });
        if let Some(wait) = self.wait {
            event["waitStartedAt"] = json!(EpochMillis(self.wait_started + self.skew).to_rfc3339());
            event["maxWaitSeconds"] = json!(wait);
        }
        // A renewal is a plain acquire by the holder (as the CLI's): only
        // the first ask of a queued caller waits on a task token.
        if self.queued && matches!(self.phase, Phase::Acquire) {
            event["taskToken"] = json!(self.token(now));
        }
        event
    }

    /// The task token of its current queued wait (one per attempt, as Step Functions mints them).
    pub fn token(&self, _now: i64) -> String {
        format!(
            "tok-{}-{}",
            self.owner.rsplit(':').next().unwrap_or("?"),
            self.tokens_used
        )
    }

    pub fn release_event(&self, lock_name: &str, limit: u32, withdraw: bool) -> Value {
        let mut event = json!({"lockName": lock_name, "owner": self.owner, "limit": limit});
        if let Some(belief) = self.belief {
            event["fencingToken"] = json!(belief.token);
        }
        if withdraw {
            event["withdraw"] = json!(true);
        }
        event
    }
}

/// 0 → 0, then +1, -1, +2, -2, …: a shrunk draw means no skew.
fn skew(draw: i64) -> i64 {
    if draw % 2 == 1 {
        (draw + 1) / 2
    } else {
        -draw / 2
    }
}

/// The grant a woken waiter's task output carries.
pub fn belief_from_output(output: &Value) -> Option<Belief> {
    Some(Belief {
        token: output["fencingToken"].as_u64()?,
        expires_at: EpochMillis::parse_rfc3339(output["expiresAt"].as_str()?)?.0,
    })
}
