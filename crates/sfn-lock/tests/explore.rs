//! The explorer's bounded run in `make test`: for each store, the seeds that
//! once failed, then fresh ones until the store's share of the budget is
//! spent. `make explore` runs it as long as asked (`EXPLORE_SECONDS`).

mod explorer;

use std::time::Duration;

use explorer::stores::Kind;

/// Seeds that once broke an invariant (DESIGN.md, "Exploring interleavings"),
/// run first every time.
const FAILED_BEFORE: &[(Kind, u64)] = &[
    // Seeds that found each re-introduced bug (`make explore-bugs`) with the
    // explorer's draws as they are now: a bug the fresh seeds of one run may
    // miss is still found, within the budget, by its seed. A change to the
    // draws makes them ordinary seeds again: find new ones (DESIGN.md). The
    // seeds of the explorer's own findings were of earlier draws; the
    // contract and queue tests written for them stay.
    (Kind::DynamoDb, 0xdfa3_bd0a_19bf_ada8), // grant condition admitting limit + 1
    (Kind::DynamoDb, 0x3dd6_6611_6954_ff3a), // hand-off cut before its wake-up
    (Kind::DynamoDb, 0xf552_0826_dbe9_7c08), // lost hand-off answer
    (Kind::DynamoDb, 0xba5d_c878_cb28_cf00), // release misreported after a lost answer
    (Kind::S3, 0x6cef_ba95_10b9_b702),       // release record checked after the holder
    (Kind::Ssm, 0x09d3_6194_9723_59f1),      // SSM stalled writer
    (Kind::Ssm, 0x0000_01a2_3f35_7dcf),      // SSM empty listing
    // The explorer's own: a waiter whose later wait its own run-on release
    // removed (excused to its bound) failed liveness with nobody named.
    (Kind::DynamoDb, 0x9eeb_33d9_d6fa_0dc1),
    // The explorer's own: a pump whose claim of an owed wake-up landed with
    // its answer lost took the retry's failure for another pump's claim and
    // sent nothing (`queue_wake_claims`).
    (Kind::DynamoDb, 0x4a8b_eac4_e04e_dc81),
];

/// Found by a fresh seed and not yet analysed, so not run by `make test`
/// (it would fail every run): reproduce with `EXPLORE_SEED=... EXPLORE_STORE=...
/// make explore`, then make it a failing test and fix it, or show the
/// invariant wrong, and move it to FAILED_BEFORE.
#[allow(dead_code)]
const OPEN_FINDINGS: &[(Kind, u64)] = &[];

fn budget() -> Duration {
    let seconds = std::env::var("EXPLORE_SECONDS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(30);
    Duration::from_secs(seconds)
}

fn fresh_seed() -> u64 {
    match std::env::var("EXPLORE_SEED") {
        Ok(text) => u64::from_str_radix(text.trim_start_matches("0x"), 16)
            .unwrap_or_else(|_| panic!("EXPLORE_SEED must be hexadecimal, got {text}")),
        Err(_) => sfn_lock::EpochMillis::now().0 as u64,
    }
}

fn explore_store(kind: Kind) {
    let seeds: Vec<u64> = FAILED_BEFORE
        .iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, s)| *s)
        .collect();
    let only = std::env::var("EXPLORE_STORE").ok();
    if only
        .as_deref()
        .is_some_and(|name| Kind::parse(name) != Some(kind))
    {
        return;
    }
    let report = explorer::explore(kind, &seeds, fresh_seed(), budget());
    println!("{}", report.line(kind));
    if let Some((seed, failure)) = report.failure {
        let shrunk = explorer::shrink(kind, seed, failure, Duration::from_secs(60));
        panic!("{}", explorer::describe(kind, seed, &shrunk));
    }
}

#[test]
fn explores_dynamodb() {
    explore_store(Kind::DynamoDb);
}

#[test]
fn explores_s3() {
    explore_store(Kind::S3);
}

#[test]
fn explores_ssm() {
    explore_store(Kind::Ssm);
}
