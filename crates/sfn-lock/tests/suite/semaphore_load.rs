//! A semaphore under load, through the real binaries: `limit` 3, 16 contenders,
//! 800 acquire → critical section → release cycles on one lock. Never more
//! than 3 inside, and 3 at some point; tokens unique, each contender's rising,
//! and a grant answered before another's request was sent has the smaller one;
//! no permit lost (the count ends at 0; 3 fresh owners get in, a 4th is not).
//!
//! Through `acquire-lock` and `release-lock` as `cargo lambda watch` serves them
//! (`scripts/local-stack.sh`), not the store in process as `concurrency.rs`:
//! the events, the markers, the `LockUnavailable` answer and release given
//! acquire's whole answer (as the ASL passes it) are part of what is proved.
//!
//! Nothing is timed. A holder stays inside until the semaphore is seen full (a
//! refusal naming its grant or sent after its grant arrived, or too few left to
//! be refused), so a 4th grant would land inside; the first 3 grants also stay
//! until 3 are inside at once. The only pause is a refusal's back-off.

use crate::common;

use std::collections::HashSet;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::{client, get_item, invoke, unique, Invocation};
use serde_json::{json, Value};

const LIMIT: usize = 3;
const CONTENDERS: usize = 16;
/// 50 each keeps `make test` lean; the `<=` mutation of the admission
/// condition showed 4 inside within the first few hundred cycles.
const CYCLES: usize = 50;
/// Far longer than the test: every hand-over is a release, never an expiry.
const LEASE_SECONDS: u64 = 3_600;

/// A grant's token, and the global sequence numbers taken when its acquire
/// request was sent and when its answer arrived.
#[derive(Clone, Copy, Debug)]
struct Grant {
    token: u64,
    sent: u64,
    answered: u64,
}

#[derive(Default)]
struct State {
    inside: usize,
    most_inside: usize,
    /// The sequence number of the latest-sent refused request.
    last_refused: u64,
    /// Every holder a refusal named, as `"owner" "expiresAt"`.
    named: HashSet<String>,
    refusals: usize,
    finished: usize,
    failed: bool,
    grants: Vec<Grant>,
}

#[derive(Default)]
struct Shared {
    sequence: AtomicU64,
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

fn acquire_event(lock: &str, owner: &str) -> String {
    json!({"lockName": lock, "owner": owner, "leaseSeconds": LEASE_SECONDS, "limit": LIMIT})
        .to_string()
}

/// A refusal names the limit and exactly `LIMIT` live holders.
fn assert_full(cause: &Value) {
    let holders = cause["holders"].as_array().map(Vec::len);
    let seen = (&cause["limit"], &cause["liveHolders"], holders);
    assert_eq!(seen, (&json!(LIMIT), &json!(LIMIT), Some(LIMIT)), "{cause}");
}

/// Acquires until granted; `None` once another contender has failed.
fn acquire(shared: &Shared, lock: &str, owner: &str) -> Option<(Value, Grant)> {
    while !shared.lock().failed {
        let sent = shared.sequence.fetch_add(1, Ordering::SeqCst);
        match invoke("acquire-lock", acquire_event(lock, owner)) {
            Invocation::Ok(answer) => {
                let answered = shared.sequence.fetch_add(1, Ordering::SeqCst);
                let token = answer["fencingToken"].as_u64().expect("fencingToken");
                return Some((
                    answer,
                    Grant {
                        token,
                        sent,
                        answered,
                    },
                ));
            }
            Invocation::FunctionError(_, _) if shared.lock().failed => break,
            Invocation::FunctionError(error_type, cause) => {
                assert_eq!(error_type, "LockUnavailable", "{cause}");
                assert_full(&cause);
                let holders = cause["holders"].as_array().into_iter().flatten();
                let named = holders.map(|h| format!("{} {}", h["owner"], h["expiresAt"]));
                shared.update(|state| {
                    state.last_refused = state.last_refused.max(sent);
                    state.named.extend(named);
                    state.refusals += 1;
                });
                // Back-off only: 13 waiters must not starve the releases.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    None
}

/// The critical section: counted in, held until the semaphore is seen full.
fn critical_section(shared: &Shared, grant: Grant, me: &str) {
    let mut state = shared.lock();
    state.inside += 1;
    let inside = state.inside;
    state.most_inside = state.most_inside.max(inside);
    let first = state.grants.len() < LIMIT;
    state.grants.push(grant);
    shared.changed.notify_all();
    assert!(inside <= LIMIT, "{inside} inside at once: {grant:?}");
    while !state.failed {
        let seen_full = state.last_refused > grant.answered || state.named.contains(me);
        let few_left = CONTENDERS - state.finished <= LIMIT;
        if (seen_full || few_left) && (!first || state.most_inside == LIMIT) {
            break;
        }
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
    // Out before the release is sent: once it is, a correct semaphore may
    // admit the next holder before this release's answer returns.
    state.inside -= 1;
}

fn contend(shared: &Shared, lock: &str, owner: &str) {
    let mut last_token = 0;
    for _ in 0..CYCLES {
        let Some((answer, grant)) = acquire(shared, lock, owner) else {
            return;
        };
        let granted = (&answer["outcome"], &answer["limit"]);
        assert_eq!(granted, (&json!("granted"), &json!(LIMIT)), "{answer}");
        assert!(grant.token > last_token, "tokens must rise: {answer}");
        last_token = grant.token;
        let me = format!("{} {}", answer["owner"], answer["expiresAt"]);
        critical_section(shared, grant, &me);
        let released = invoke("release-lock", answer.to_string()).ok();
        assert_eq!(released["outcome"], "released", "{released}");
    }
}

#[test]
fn limit_three_admits_at_most_three_and_reaches_three_with_tokens_in_grant_order() {
    let (lock, shared, started) = (unique("sem-load"), Shared::default(), Instant::now());
    std::thread::scope(|scope| {
        for contender in 0..CONTENDERS {
            let (shared, lock) = (&shared, lock.as_str());
            scope.spawn(move || {
                let owner = format!("arn:exec:load-{contender}");
                let outcome = catch_unwind(AssertUnwindSafe(|| contend(shared, lock, &owner)));
                let failed = outcome.is_err();
                shared.update(|state| {
                    state.finished += 1;
                    state.failed |= failed;
                });
                outcome.unwrap_or_else(|panic| resume_unwind(panic));
            });
        }
    });
    let state = shared.state.into_inner().unwrap();
    let (elapsed, refusals, most) = (started.elapsed(), state.refusals, state.most_inside);
    println!("semaphore_load: {elapsed:.1?}, {refusals} refusals, at most {most} inside");
    assert_eq!(state.grants.len(), CONTENDERS * CYCLES);
    assert_eq!(most, LIMIT, "never {LIMIT} inside at once");
    let mut grants = state.grants;
    grants.sort_by_key(|grant| grant.token);
    assert!(grants.windows(2).all(|two| two[0].token < two[1].token));
    // Walking down the tokens, keep the earliest answer among the larger ones:
    // no grant with a smaller token may have been requested after it.
    let mut earliest_answer_above = u64::MAX;
    for grant in grants.iter().rev() {
        let message = "requested after a grant with a larger token was answered";
        assert!(grant.sent < earliest_answer_above, "{grant:?} {message}");
        earliest_answer_above = earliest_answer_above.min(grant.answered);
    }

    // No permit lost: the count is back to 0, and 3 fresh owners fill the semaphore.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let item = runtime.block_on(async { get_item(&client().await, &lock).await });
    let count = item
        .as_ref()
        .and_then(|item| item.get("holderCount")?.as_n().ok());
    assert_eq!(count.map(String::as_str), Some("0"), "{item:?}");
    let highest = grants.last().expect("grants").token;
    for fresh in 0..LIMIT {
        let owner = format!("arn:exec:fresh-{fresh}");
        let granted = invoke("acquire-lock", acquire_event(&lock, &owner)).ok();
        assert_eq!(granted["outcome"], "granted", "{granted}");
        assert!(
            granted["fencingToken"].as_u64() > Some(highest),
            "{granted}"
        );
    }
    let (error_type, cause) = invoke("acquire-lock", acquire_event(&lock, "arn:exec:4th")).error();
    assert_eq!(error_type, "LockUnavailable", "{cause}");
    assert_full(&cause);
}
