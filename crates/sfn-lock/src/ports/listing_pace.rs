//! Pacing of an operator's listing on SSM (`list_held`: the `names` pages,
//! then one read per lock). Parameter Store's throughput is the account's,
//! per Region, and the locks' own calls draw on it: 40 requests a second by
//! default for `GetParameter`, `GetParameters` and `GetParametersByPath`
//! together, about 3 for `PutParameter`. A listing at full speed
//! (`sfn-lock list --max 10000`: thousands of requests) would take it all
//! and get production acquires and releases throttled, so the SSM store
//! sends a listing's requests at most [`LISTING_REQUESTS_PER_SECOND`] a
//! second, in this process, whoever lists. DESIGN.md, "Operators' reads".

#![cfg_attr(not(feature = "ssm"), allow(dead_code))] // only the SSM store paces its listing

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A listing's requests a second on average: an eighth of the 40 the
/// account's reads share by default, so that the locks' own calls keep the
/// rest even with several operators listing at once. A read's two requests
/// go back to back: at most 6 fall in any one second.
pub const LISTING_REQUESTS_PER_SECOND: u32 = 5;
/// The time a listing's request takes from its share.
const INTERVAL: Duration = Duration::from_millis(1000 / LISTING_REQUESTS_PER_SECOND as u64);
/// The requests of one lock's read: `GetParameter` of its hint and
/// `GetParameters` of the ten generations from it. A read that needs more
/// (a hint far behind, or none: its generations are listed) is charged two.
pub const LOCK_READ_REQUESTS: u32 = 2;
/// Parameters per `GetParametersByPath` page (SSM's most).
pub const PAGE_PARAMETERS: usize = 10;
/// The fewest parameters a lock listed has: its hint, its newest generation,
/// and a held lock's marker (more while old generations wait to be deleted).
pub const PARAMETERS_PER_LOCK: usize = 3;

/// About how many requests, and how long, an SSM listing of `max_locks`
/// takes at most: the pages that name them, then their reads. A store with
/// fewer locks ends sooner; one whose locks keep many old generations needs
/// more pages.
pub fn listing_estimate(max_locks: usize) -> (u64, Duration) {
    let pages = (max_locks * PARAMETERS_PER_LOCK).div_ceil(PAGE_PARAMETERS);
    let requests = (pages + max_locks * LOCK_READ_REQUESTS as usize) as u64;
    (requests, INTERVAL * requests as u32)
}

/// Spaces requests [`INTERVAL`] apart: a batch of n waits until the
/// previous batch's time has passed, and takes n intervals. Idle time
/// earns no credit, so a listing never bursts after a pause.
#[derive(Debug)]
pub(crate) struct Pacer {
    interval: Duration,
    next: Option<Instant>,
}

impl Pacer {
    pub(crate) const fn new(interval: Duration) -> Self {
        Pacer {
            interval,
            next: None,
        }
    }

    /// Reserves the next `requests` at `now`: how long to wait before sending them.
    pub(crate) fn reserve(&mut self, now: Instant, requests: u32) -> Duration {
        let start = self.next.map_or(now, |next| next.max(now));
        self.next = Some(start + self.interval * requests);
        start - now
    }
}

/// One pacer per process: two listings at once share the rate, as they
/// share the account's throughput.
static PACER: Mutex<Pacer> = Mutex::new(Pacer::new(INTERVAL));

/// What a listing has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListingProgress {
    /// Requests sent (or about to be), each through the pacer.
    pub requests: u64,
    /// `GetParametersByPath` pages read to name the locks.
    pub pages: u64,
    /// Locks named so far.
    pub locks_found: usize,
    /// Lock reads begun.
    pub locks_read: usize,
}

type Report = Box<dyn Fn(&ListingProgress) + Send + Sync>;

struct Scope {
    paced: bool,
    progress: Mutex<ListingProgress>,
    report: Option<Report>,
}

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// Runs `listing` (a `list_held`) and calls `report` after each of its
/// paced steps; answers its output and what it did.
pub async fn watched<F: Future>(
    report: impl Fn(&ListingProgress) + Send + Sync + 'static,
    listing: F,
) -> (F::Output, ListingProgress) {
    let scope = Arc::new(Scope {
        paced: true,
        progress: Mutex::default(),
        report: Some(Box::new(report)),
    });
    let output = SCOPE.scope(scope.clone(), listing).await;
    let done = *scope
        .progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    (output, done)
}

/// Runs `listing` unpaced: for the reconciler, whose listing is bounded
/// (`MAX_RECONCILE_LOCKS`) and must end within its invocation's budget,
/// which a paced listing of a large store would not.
pub async fn unpaced<F: Future>(listing: F) -> F::Output {
    let scope = Arc::new(Scope {
        paced: false,
        progress: Mutex::default(),
        report: None,
    });
    SCOPE.scope(scope, listing).await
}

/// Whether a listing here is paced (everywhere but inside [`unpaced`]).
pub fn is_paced() -> bool {
    SCOPE.try_with(|scope| scope.paced).unwrap_or(true)
}

/// Waits for the turn of a listing's next `requests`, and counts them.
pub(crate) async fn turn(requests: u32) {
    let _ = SCOPE.try_with(|scope| {
        scope
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests += u64::from(requests);
    });
    if !is_paced() {
        return;
    }
    let wait = {
        let mut pacer = PACER.lock().unwrap_or_else(PoisonError::into_inner);
        pacer.reserve(Instant::now(), requests)
    };
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

/// Records a listing's step and tells whoever watches it.
pub(crate) fn record(step: impl FnOnce(&mut ListingProgress)) {
    let _ = SCOPE.try_with(|scope| {
        let now = {
            let mut progress = scope
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            step(&mut progress);
            *progress
        };
        if let Some(report) = &scope.report {
            report(&now);
        }
    });
}

#[cfg(test)]
mod tests;
