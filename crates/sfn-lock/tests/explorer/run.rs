//! One run: callers drawn from a seed, then step after step the scheduler
//! lets every caller run until it waits on the wire, picks one parked request
//! and its fate (or lets time pass), and checks the invariants. After
//! `FAULT_STEPS` steps the faults stop and the run must end with every caller
//! done within `LIVENESS_MS`.

use std::collections::BTreeMap;
use std::sync::Arc;

use sfn_lock::sweep::cleanup::Sweeper;
use sfn_lock::sweep::policy::SweepPolicy;
use sfn_lock::{AnyStore, LeaseSeconds, LockName, Locker};

use super::callers::{Caller, GRACE_SECONDS};
use super::checks;
use super::draws::Draws;
use super::fates::{Continuations, Fate};
pub use super::ops::{Answered, Failure, Op, Stats};
pub use super::pauses::STALLS_MS;
use super::ports::{World, MACHINE};
use super::stores::{self, Kind};
use super::tokens::Tokens;
use super::wire::Wire;

pub const FAULT_STEPS: usize = 60;
/// A run that has not ended by then loops (a 2 h pause alone is 120 reconciler runs).
pub const MAX_STEPS: usize = 10_000;
/// Every caller is done this long after the faults stop and the last pause
/// ends: longest lease (1500 s) + wait (600 s) + reconciler + grace, with room.
pub const LIVENESS_MS: i64 = 45 * 60_000;
pub const RECONCILE_EVERY_MS: i64 = 60_000;

/// The reconciler's period: a minute, or on SSM (no queue whose wake-ups it
/// owes) the template's default five, which spares a run hundreds of
/// reconciler requests while a process pauses.
pub fn reconcile_every(kind: Kind) -> i64 {
    match kind {
        Kind::Ssm => 5 * RECONCILE_EVERY_MS,
        _ => RECONCILE_EVERY_MS,
    }
}
pub const RECONCILER: usize = 1_000;
pub const SWEEPS: usize = 2_000;
pub const OPERATOR: usize = 3_000;
/// The explorer's own notes in the trace (a profile, a stall, the faults' end).
pub const NARRATOR: usize = usize::MAX - 1;

pub struct Run {
    pub kind: Kind,
    pub profile: super::profile::Profile,
    pub run_id: String,
    pub start: i64,
    pub now: i64,
    pub draws: Draws,
    pub wire: Wire,
    pub tokens: Tokens,
    pub world: World,
    pub locker: Arc<Locker<AnyStore>>,
    pub sweeper: Arc<Sweeper<AnyStore, World, World>>,
    pub direct: AnyStore,
    pub locks: Vec<(LockName, u32)>,
    pub callers: Vec<Caller>,
    pub ops: BTreeMap<usize, Op>,
    /// Cleanup-queue messages due: (when, body, receives so far).
    pub sweeps_due: Vec<(i64, String, u32)>,
    pub next_reconcile: i64,
    pub trace: Vec<String>,
    pub rising: checks::Tokens,
    pub continuations: Continuations,
    pub stats: Stats,
    /// A sweep or reconciler request landed since (for the release check).
    pub system_landings: usize,
    /// Requests landed by each caller's release operations.
    pub release_landings: std::collections::BTreeMap<usize, usize>,
    /// Answers each caller lost (its requests landed; the SDK retried).
    pub lost_answers: std::collections::BTreeMap<usize, usize>,
    pub sweeps_started: usize,
    /// Requests whose caller gave up on them, still on their way.
    pub orphans: Vec<super::wire::Parked>,
    /// Callers one of whose release calls was given up on while its request
    /// was on its way: Step Functions' next call may find the grant gone.
    pub orphaned_releases: std::collections::BTreeSet<usize>,
    /// Owners whose grant an operator forced out: not told, so their belief no longer counts.
    pub forced: Arc<std::sync::Mutex<Vec<(String, u64)>>>,
    /// Grants a forced release went for; confirmed into `forced` once gone from the store.
    pub force_targets: Arc<std::sync::Mutex<Vec<(usize, String, u64)>>>,
    /// Hand-offs seen, and their wake-ups (`asleep.rs`).
    pub handed: super::asleep::Handed,
    /// Release calls that run on, by wire identity, and each identity's caller (`runaway.rs`).
    pub runaways: super::runaway::Runaways,
    pub pauses: super::pauses::Pauses,
}

impl Run {
    pub async fn new(kind: Kind, seed: u64, replay: Option<Vec<u64>>) -> Run {
        let mut draws = match replay {
            Some(record) => Draws::replaying(seed, record),
            None => Draws::from_seed(seed),
        };
        let wire = Wire::default();
        let run_id = format!("x{seed:x}-{}", unique());
        let sdk = stores::sdk(wire.client()).await;
        let direct_sdk = stores::direct_sdk().await;
        if kind == Kind::DynamoDb {
            stores::create_table(&direct_sdk, &run_id).await;
        }
        let store = stores::build(kind, &sdk, &run_id);
        let direct = stores::build(kind, &direct_sdk, &run_id);
        let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap_or_else(|e| panic!("{e}"));
        let world = World::default();
        let policy = SweepPolicy::from_lookup(|name| match name {
            "SWEPT_STATE_MACHINE_ARNS" => Some(MACHINE.to_owned()),
            "SWEEP_GRACE_SECONDS" => Some(GRACE_SECONDS.to_string()),
            _ => None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        // A whole second: SSM's `Date` has whole seconds, so replays agree.
        let start = sfn_lock::EpochMillis::now().0 / 1000 * 1000;
        // Contention is the point: half the locks are semaphores, and there
        // are always more callers than permits.
        let profile = super::profile::Profile::draw(&mut draws);
        let limits = [1 + draws.below(2) as u32 * (1 + draws.below(2) as u32), 1];
        let lock_count = if draws.chance(25) { 2 } else { 1 };
        let locks = (0..lock_count)
            .map(|index| {
                let name =
                    LockName::new(format!("{run_id}-{index}")).unwrap_or_else(|e| panic!("{e}"));
                (name, limits[index])
            })
            .collect();
        let count = limits[0] as usize + 1 + profile.extra_callers(&mut draws);
        let callers = (0..count)
            .map(|id| {
                let shape = (start, lock_count, kind.queues());
                Caller::draw(id, &run_id, shape, &profile, &mut draws)
            })
            .collect();
        let mut run = Run {
            kind,
            profile,
            run_id,
            start,
            now: start,
            draws,
            wire,
            tokens: Tokens::default(),
            locker: Arc::new(Locker::new(store.clone(), lease)),
            sweeper: Arc::new(Sweeper {
                store,
                executions: world.clone(),
                requeue: Some(world.clone()),
                policy,
            }),
            world,
            direct,
            locks,
            callers,
            ops: BTreeMap::new(),
            sweeps_due: Vec::new(),
            next_reconcile: start + reconcile_every(kind),
            trace: Vec::new(),
            rising: checks::Tokens::default(),
            continuations: Continuations::default(),
            stats: Stats::default(),
            system_landings: 0,
            release_landings: BTreeMap::new(),
            lost_answers: BTreeMap::new(),
            sweeps_started: 0,
            orphans: Vec::new(),
            orphaned_releases: Default::default(),
            forced: Arc::default(),
            force_targets: Arc::default(),
            handed: Default::default(),
            runaways: Default::default(),
            pauses: Default::default(),
        };
        run.note(NARRATOR, profile.describe());
        run
    }

    pub async fn go(mut self) -> Result<Stats, Failure> {
        let mut quiet_since = None;
        loop {
            self.settle().await?;
            self.harvest().await?;
            self.harvest_runaways().await;
            if self.start_due().await? {
                continue;
            }
            let forced = self
                .forced
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            for lock in 0..self.locks.len() {
                checks::limit(&self.callers, &forced, lock, self.locks[lock].1, self.now)
                    .map_err(|e| self.fail(e))?;
            }
            let faulty = self.faulty();
            if !faulty && quiet_since.is_none() {
                quiet_since = Some((self.now, self.liveness_ms()));
                self.note(NARRATOR, "— faults stop —");
            }
            if let Some((since, bound)) = quiet_since {
                // Callers excused to their own wait bound (a later wait their
                // own run-on release removed) are not late: only the others
                // fail liveness, named.
                let waiting = match self.now - since.max(self.pauses.last_due) > bound {
                    true => self.still_waiting(bound),
                    false => String::new(),
                };
                if !waiting.is_empty() {
                    return Err(self.fail(format!(
                        "liveness: callers not done {} min after the faults stopped: {waiting}",
                        bound / 60_000
                    )));
                }
            }
            if self.stats.steps > MAX_STEPS {
                return Err(self.fail("steps: the run did not end".into()));
            }
            if !self.orphans.is_empty() && (!faulty || self.draws.chance(30)) {
                let orphan = self
                    .orphans
                    .remove(self.draws.below(self.orphans.len() as u64) as usize);
                self.stats.steps += 1;
                self.deliver(orphan, Fate::Land).await?;
                continue;
            }
            let mut parked = self.offered();
            self.hold_back(&mut parked);
            if parked.is_empty() {
                match self.next_timer() {
                    Some(at) => self.advance_to(at),
                    None => {
                        self.footprint().await?;
                        return Ok(self.stats);
                    }
                }
                continue;
            }
            self.stats.steps += 1;
            // An SSM run that leans on pauses has no stalls: a stall of hours
            // would outlast every lease a pause is meant to land inside. On
            // the other stores pauses lean on nothing (`pauses.rs`), and the
            // stalls are what their failure paths need (a retried acquire
            // stalled while the lock was handed to it).
            let leans = self.profile.pauses > 0 && self.kind == Kind::Ssm;
            let stalls = if leans { 0 } else { 3 };
            if faulty && self.draws.chance(stalls) {
                let stall = STALLS_MS[self.draws.below(STALLS_MS.len() as u64) as usize];
                self.wire.put_back(parked);
                self.note(
                    NARRATOR,
                    format!(
                        "— {} s pass while {} request(s) wait —",
                        stall / 1000,
                        self.wire.parked_callers().len()
                    ),
                );
                self.advance_to(self.now + stall);
                self.handed.stalled_ms += stall;
                continue;
            }
            if faulty && self.draws.chance(2) {
                self.wire.put_back(parked);
                self.abort_one();
                continue;
            }
            if faulty && self.draws.chance(2) {
                self.wire.put_back(parked);
                self.run_away(None);
                continue;
            }
            if faulty && self.draws.chance(1) && !self.ops.contains_key(&OPERATOR) {
                self.wire.put_back(parked);
                self.force_release();
                continue;
            }
            let chosen = parked.remove(self.draws.below(parked.len() as u64) as usize);
            self.wire.put_back(parked);
            // A release's write lost unheard is where calls that run on
            // matter (`runaway.rs`): it comes more often.
            let releasing = matches!(self.op_of(chosen.caller), Some(Op::Release { .. }));
            let fate = match faulty {
                true if releasing && chosen.writes() && self.draws.chance(10) => Fate::AnswerLost,
                true if (self.profile.short_listings
                    || self.continuations.follows_empty_probe(&chosen))
                    && super::fates::is_listing(&chosen)
                    && self.draws.chance(60) =>
                {
                    Fate::ShortPage
                }
                true => Fate::draw(&mut self.draws),
                false => Fate::Land,
            };
            self.dispatch(chosen, fate).await?;
        }
    }

    /// The liveness bound as the faults stop: plus two minutes for every
    /// locked section still to run (a busy lock's callers take it one after
    /// another: up to 90 s of work and a 20 s poll each).
    pub fn liveness_ms(&self) -> i64 {
        let sections: i64 = self
            .callers
            .iter()
            .map(|c| i64::from(c.cycles_left) + 1)
            .sum();
        LIVENESS_MS + sections * 120_000
    }

    pub fn reconciler_id() -> usize {
        RECONCILER
    }

    pub fn sweep_id(n: usize) -> usize {
        SWEEPS + n
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUNS: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    )
}
