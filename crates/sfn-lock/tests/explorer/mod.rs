//! The explorer (issue 24): the library's own code (the `Locker` over each
//! store, the sweep, the reconciler, the queue's wake-ups) run as several
//! callers against the real local server, with every request's order and
//! fate drawn from a seed, the invariants checked after every step.
//! DESIGN.md, "Exploring interleavings", says what it covers and why it runs
//! on the real server rather than on in-process models.

mod answers;
mod asleep;
pub mod callers;
mod checks;
pub mod draws;
mod events;
mod fates;
mod footprint;
mod ops;
mod pauses;
mod ports;
mod profile;
mod releases;
pub mod run;
mod runaway;
mod server;
mod start;
mod step;
pub mod stores;
mod tokens;
mod trace;
mod wire;

use std::time::{Duration, Instant};

use run::{Failure, Run, Stats};
use stores::Kind;

/// Runs one schedule on a runtime of its own, its clock paused (virtual).
pub fn run_once(kind: Kind, seed: u64, replay: Option<Vec<u64>>) -> Result<Stats, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap_or_else(|error| panic!("a runtime: {error}"));
    runtime.block_on(async move {
        let run = Run::new(kind, seed, replay).await;
        let run_id = run.run_id.clone();
        let result = run.go().await;
        if kind == Kind::DynamoDb {
            stores::delete_table(&stores::direct_sdk().await, &run_id).await;
        }
        result
    })
}

/// What a bounded exploration did.
#[derive(Debug, Default)]
pub struct Report {
    pub schedules: usize,
    pub steps: usize,
    pub requests: usize,
    pub elapsed: Duration,
    pub failure: Option<(u64, Failure)>,
}

impl Report {
    pub fn line(&self, kind: Kind) -> String {
        let seconds = self.elapsed.as_secs_f64().max(0.001);
        format!(
            "{}: {} schedules ({} steps, {} requests) in {seconds:.1} s: {:.1} schedules/s",
            kind.name(),
            self.schedules,
            self.steps,
            self.requests,
            self.schedules as f64 / seconds
        )
    }
}

/// Runs `seeds` (then fresh ones from `fresh_from`) until `budget` is spent or one fails.
pub fn explore(kind: Kind, seeds: &[u64], fresh_from: u64, budget: Duration) -> Report {
    let began = Instant::now();
    let mut report = Report::default();
    let fresh = (0..).map(|n: u64| fresh_from.wrapping_add(n.wrapping_mul(0x2545_f491_4f6c_dd1d)));
    for seed in seeds.iter().copied().chain(fresh) {
        // Every seed that once failed, and at least one fresh seed: the one
        // `EXPLORE_SEED` names when a printed failure is replayed.
        if began.elapsed() >= budget && report.schedules > seeds.len() {
            break;
        }
        report.schedules += 1;
        match run_once(kind, seed, None) {
            Ok(stats) => {
                report.steps += stats.steps;
                report.requests += stats.requests;
            }
            Err(failure) => {
                report.failure = Some((seed, failure));
                break;
            }
        }
    }
    report.elapsed = began.elapsed();
    report
}

/// The smallest replay of `failure` found within `budget` that breaks the same invariant.
pub fn shrink(kind: Kind, seed: u64, failure: Failure, budget: Duration) -> Failure {
    let began = Instant::now();
    let wanted = failure.kind().to_owned();
    let mut best = failure;
    let record = best.record.clone();
    let mut found: Option<Failure> = None;
    let shrunk = draws::shrink(
        record,
        |candidate| {
            if began.elapsed() > budget {
                return false;
            }
            match run_once(kind, seed, Some(candidate.to_vec())) {
                Err(again) if again.kind() == wanted => {
                    found = Some(again);
                    true
                }
                _ => false,
            }
        },
        400,
    );
    if let Some(again) = found {
        if again.record.len() <= best.record.len() || shrunk.len() < best.record.len() {
            best = again;
        }
    }
    best
}

/// The failure as printed: the invariant, how to replay it, the trace.
pub fn describe(kind: Kind, seed: u64, failure: &Failure) -> String {
    format!(
        "{}\n  store {}, seed {seed:#x} (EXPLORE_SEED={seed:#x} EXPLORE_STORE={} make explore)\n  trace ({} lines):\n{}",
        failure.invariant,
        kind.name(),
        kind.name(),
        failure.trace.len(),
        failure.trace.iter().map(|line| format!("    {line}")).collect::<Vec<_>>().join("\n")
    )
}
