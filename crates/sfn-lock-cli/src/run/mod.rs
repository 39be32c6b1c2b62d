//! `sfn-lock run`: take the lock, run the command under it, keep the lease
//! alive while it runs, release when it exits. A command never runs on
//! without its lock silently: a lease that cannot be renewed in time sends it
//! SIGTERM.

// Its flags. Before the take: this host's clock against the store's. While
// the command runs: the lease kept alive and the command stopped if it is lost.
mod args;
mod clock;
mod supervise;

use std::time::Duration;

use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, Lease, LeaseSeconds, Limit, LockName, LockStore, Owner,
    StoreError,
};
use tokio::time::{sleep, Instant};

pub use args::RunArgs;

use crate::store::{host, open_with_sdk};
use clock::check as check_clock;
use supervise::{supervise, Held};

/// setlock's status for "lock not obtained".
const NOT_OBTAINED: u8 = 111;
/// The longest pause between two tries while waiting.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub async fn run(args: RunArgs, store: Option<&str>) -> u8 {
    let say = |text: String| eprintln!("sfn-lock: {text}");
    let (lock_name, owner, seconds, limit) = match request(&args) {
        Ok(request) => request,
        Err(error) => {
            say(error);
            return 2;
        }
    };
    let store = match open_with_sdk(store).await {
        Ok((store, url, sdk)) => {
            if args.verbose {
                say(format!("store {url}, owner {}", owner.as_str()));
            }
            // Every decision below compares leases with this host's clock:
            // one that is wrong takes nothing (clock/mod.rs).
            if let Err(refused) = check_clock(&url, &sdk, &lock_name, args.verbose).await {
                say(refused.to_string());
                return 1;
            }
            store
        }
        Err(why) => {
            say(why);
            return 1;
        }
    };
    let lease = match take(&store, &args, (&lock_name, &owner), seconds, limit).await {
        Taken::Lease(lease) => lease,
        Taken::NotObtained(why) => {
            if args.skip_quietly {
                return 0;
            }
            say(why);
            return args.conflict_exit_code.unwrap_or(NOT_OBTAINED);
        }
        Taken::Failed(why) => {
            say(why);
            // The failed acquire's write may have landed, its answer lost
            // (an attempt timeout, a dropped connection): left alone, this
            // run's owner would hold the lock for --lease with nobody to use
            // it. The release is conditional on this owner, so it frees only
            // what this run may have taken.
            release(&store, &lock_name, &owner, limit, args.verbose).await;
            return 1;
        }
    };
    if args.verbose {
        say(format!(
            "took {:?} with fencing token {}, lease until {}",
            lock_name.as_str(),
            lease.fencing_token,
            lease.expires_at
        ));
    }
    let held = Held {
        store,
        lease,
        seconds,
        limit,
    };
    let status = supervise(&held, &args.command).await;
    release(&held.store, &lock_name, &owner, limit, args.verbose).await;
    status
}

/// Releases what `owner` holds of the lock, saying so with --verbose; a
/// store error only delays the lock's freedom until the lease ends.
async fn release(
    store: &AnyStore,
    lock_name: &LockName,
    owner: &Owner,
    limit: Limit,
    verbose: bool,
) {
    match store
        .release_with_limit(lock_name, owner, limit, EpochMillis::now())
        .await
    {
        Ok(outcome) if verbose => eprintln!("sfn-lock: released: {outcome:?}"),
        Ok(_) => {}
        Err(error) => eprintln!("sfn-lock: could not release (its lease will end it): {error}"),
    }
}

fn request(args: &RunArgs) -> Result<(LockName, Owner, LeaseSeconds, Limit), String> {
    let owner = args.owner.clone().unwrap_or_else(default_owner);
    Ok((
        LockName::new(args.lock_name.clone()).map_err(|e| e.to_string())?,
        Owner::new(owner).map_err(|e| e.to_string())?,
        LeaseSeconds::new("--lease", args.lease).map_err(|e| e.to_string())?,
        Limit::new("--limit", args.limit).map_err(|e| e.to_string())?,
    ))
}

/// `host:pid:random`: unique, and says where the holder runs.
fn default_owner() -> String {
    format!(
        "{}:{}:{:06x}",
        host(),
        std::process::id(),
        random() % 0x100_0000
    )
}

fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(EpochMillis::now().0 as u128);
    hasher.finish()
}

enum Taken {
    Lease(Lease),
    NotObtained(String),
    Failed(String),
}

/// Tries, and while others hold the lock waits with capped, jittered backoff.
async fn take(
    store: &AnyStore,
    args: &RunArgs,
    (lock_name, owner): (&LockName, &Owner),
    seconds: LeaseSeconds,
    limit: Limit,
) -> Taken {
    let deadline = args
        .wait
        .map(|wait| Instant::now() + Duration::from_secs(wait));
    let mut backoff = Duration::from_millis(200);
    let mut announced: Option<Vec<String>> = None;
    loop {
        let outcome = store
            .acquire_with_limit(lock_name, owner, seconds, limit, EpochMillis::now())
            .await;
        let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let may_wait = !args.no_wait && left != Some(Duration::ZERO);
        let contention = match outcome {
            Ok(AcquireOutcome::Granted(lease) | AcquireOutcome::Renewed(lease)) => {
                return Taken::Lease(lease)
            }
            Ok(AcquireOutcome::Held(contention)) => contention,
            Ok(AcquireOutcome::Queued { .. }) => {
                return Taken::Failed("the store queued a caller that did not ask to".into())
            }
            // Inside the wait bound a store that does not answer is one more
            // reason to wait, as for the functions (StoreUnavailableWhileWaiting):
            // one transient error must not end a long wait. If the write
            // landed, the next try renews it (same owner).
            Err(StoreError::Unavailable(detail)) if may_wait => {
                eprintln!("sfn-lock: the store did not answer, trying again: {detail}");
                pause(&mut backoff, left).await;
                continue;
            }
            Err(error) => return Taken::Failed(format!("the store failed: {error}")),
        };
        let holders: Vec<String> = contention
            .holders
            .iter()
            .map(|h| {
                format!(
                    "{} (fencing token {}, lease until {})",
                    h.owner, h.fencing_token, h.expires_at
                )
            })
            .collect();
        let held = format!(
            "lock {:?} is held by {}",
            lock_name.as_str(),
            holders.join(", ")
        );
        if !may_wait {
            return Taken::NotObtained(format!("{held}: not obtained"));
        }
        // Who it waits for, whenever that changes (each try with --verbose):
        // a long wait is never silent.
        let owners: Vec<String> = contention.holders.iter().map(|h| h.owner.clone()).collect();
        if args.verbose || announced.as_ref() != Some(&owners) {
            let bound = match args.wait {
                Some(wait) => format!("up to {wait} s"),
                None => "no time limit".into(),
            };
            eprintln!("sfn-lock: {held}; waiting ({bound})");
            announced = Some(owners);
        }
        pause(&mut backoff, left).await;
    }
}

/// Sleeps about `backoff`, doubled for next time up to [`MAX_BACKOFF`]. The
/// last try comes at the deadline (`left`), not a pause before it.
async fn pause(backoff: &mut Duration, left: Option<Duration>) {
    sleep(jittered(*backoff).min(left.unwrap_or(Duration::MAX))).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

/// Between half and all of `backoff`, so that waiters spread out.
fn jittered(backoff: Duration) -> Duration {
    let half = backoff / 2;
    half + Duration::from_millis(random() % (half.as_millis() as u64 + 1))
}
