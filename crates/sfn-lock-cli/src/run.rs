//! `sfn-lock run`: take the lock, run the command under it, keep the lease
//! alive while it runs, release when it exits. A command never runs on
//! without its lock silently: a lease that cannot be renewed in time sends it
//! SIGTERM.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use clap::Args;
use sfn_lock::lambda::sdk_config;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, Lease, LeaseSeconds, Limit, LockName, LockStore, Owner,
    StoreUrl,
};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep, timeout, Instant};

/// setlock's status for "lock not obtained".
const NOT_OBTAINED: u8 = 111;
/// The longest pause between two tries while waiting.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The store: dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH
    /// [default: LOCK_STORE_URL, or LOCK_TABLE_NAME]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Lease in seconds; renewed in the background while COMMAND runs.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    lease: i64,
    /// Wait at most this long for the lock [default: for ever].
    #[arg(long, value_name = "SECS", conflicts_with = "no_wait")]
    wait: Option<u64>,
    /// Try once; do not wait.
    #[arg(short = 'n', long)]
    no_wait: bool,
    /// Lock not obtained: exit 0, quietly (for cron jobs that should skip).
    #[arg(short = 'x')]
    skip_quietly: bool,
    /// Lock not obtained: exit with this status instead of 111.
    #[arg(long, value_name = "N", conflicts_with = "skip_quietly")]
    conflict_exit_code: Option<u8>,
    /// How many may hold the lock at once (a semaphore).
    #[arg(long, value_name = "N", default_value_t = 1)]
    limit: i64,
    /// The owner to hold the lock as [default: host:pid:random].
    #[arg(long, value_name = "ID")]
    owner: Option<String>,
    /// Say each decision on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// The lock's name.
    lock_name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What the run holds the lock with.
struct Held {
    store: AnyStore,
    lease: Lease,
    seconds: LeaseSeconds,
    limit: Limit,
}

pub async fn run(args: RunArgs) -> u8 {
    let say = |text: String| eprintln!("sfn-lock: {text}");
    let (lock_name, owner, seconds, limit) = match request(&args) {
        Ok(request) => request,
        Err(error) => {
            say(error);
            return 2;
        }
    };
    let url = match args.store.as_deref() {
        Some(url) => StoreUrl::parse(url),
        None => StoreUrl::from_lookup(|name| std::env::var(name).ok()),
    };
    let sdk = sdk_config().await;
    let store = match url.and_then(|url| Ok((AnyStore::from_url(&url, &sdk)?, url))) {
        Ok((store, url)) => {
            if args.verbose {
                say(format!("store {url}, owner {}", owner.as_str()));
            }
            store
        }
        Err(error) => {
            say(format!("the store is misconfigured: {error}"));
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
    let status = supervise(&held, &args).await;
    match held
        .store
        .release_with_limit(
            &held.lease.lock_name,
            &held.lease.owner,
            limit,
            EpochMillis::now(),
        )
        .await
    {
        Ok(outcome) if args.verbose => say(format!("released: {outcome:?}")),
        Ok(_) => {}
        Err(error) => say(format!(
            "could not release (its lease will end it): {error}"
        )),
    }
    status
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
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!(
        "{host}:{}:{:06x}",
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
    loop {
        let outcome = store
            .acquire_with_limit(lock_name, owner, seconds, limit, EpochMillis::now())
            .await;
        let contention = match outcome {
            Ok(AcquireOutcome::Granted(lease) | AcquireOutcome::Renewed(lease)) => {
                return Taken::Lease(lease)
            }
            Ok(AcquireOutcome::Held(contention)) => contention,
            Ok(AcquireOutcome::Queued { .. }) => {
                return Taken::Failed("the store queued a caller that did not ask to".into())
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
        let pause = jittered(backoff);
        if args.no_wait || deadline.is_some_and(|deadline| Instant::now() + pause > deadline) {
            return Taken::NotObtained(format!("{held}: not obtained"));
        }
        if args.verbose {
            eprintln!("sfn-lock: {held}; waiting");
        }
        sleep(pause).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Between half and all of `backoff`, so that waiters spread out.
fn jittered(backoff: Duration) -> Duration {
    let half = backoff / 2;
    half + Duration::from_millis(random() % (half.as_millis() as u64 + 1))
}

/// Runs the command; forwards SIGINT, SIGTERM and SIGHUP to it; renews the
/// lease; sends it SIGTERM if the lease is lost. The run's exit status.
async fn supervise(held: &Held, args: &RunArgs) -> u8 {
    let lease = &held.lease;
    let spawned = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("SFN_LOCK_NAME", lease.lock_name.as_str())
        .env("SFN_LOCK_OWNER", lease.owner.as_str())
        .env("SFN_LOCK_FENCING_TOKEN", lease.fencing_token.to_string())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            eprintln!("sfn-lock: cannot run {:?}: {error}", args.command[0]);
            return 127;
        }
    };
    let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
    let forward = |signal: i32| {
        if let Some(pid) = pid {
            // SAFETY: kill(2) on our own child's pid; it has no memory effects here.
            unsafe { libc::kill(pid, signal) };
        }
    };
    let mut signals = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(int), Ok(term), Ok(hup)) => (int, term, hup),
        _ => {
            forward(libc::SIGTERM);
            eprintln!("sfn-lock: cannot watch signals; stopped the command");
            return 1;
        }
    };
    let heartbeat = crate::run::keep_alive(held);
    tokio::pin!(heartbeat);
    let mut lost = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = signals.0.recv() => forward(libc::SIGINT),
            _ = signals.1.recv() => forward(libc::SIGTERM),
            _ = signals.2.recv() => forward(libc::SIGHUP),
            why = &mut heartbeat, if lost.is_none() => {
                eprintln!("sfn-lock: {why}: the lock's protection is gone, sending the command SIGTERM");
                forward(libc::SIGTERM);
                lost = Some(why);
            }
        }
    };
    let code = match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
            (None, None) => 1,
        },
        Err(error) => {
            eprintln!("sfn-lock: lost track of the command: {error}");
            1
        }
    };
    match (lost, code) {
        (Some(_), 0) => 1,
        _ => code,
    }
}

/// Renews the lease every third of it; answers why, once it can no longer
/// be sure to hold the lock: another owner has it, a renewal came back as a
/// new grant (the lease had run out), or no renewal landed before the last
/// sixth of the lease.
async fn keep_alive(held: &Held) -> String {
    let lease = &held.lease;
    let seconds = u64::from(held.seconds.get());
    let every = Duration::from_millis(seconds * 1000 / 3);
    let margin = (seconds * 1000 / 6) as i64;
    let mut expires_at = lease.expires_at;
    let mut next = Instant::now() + every;
    loop {
        sleep(next.saturating_duration_since(Instant::now())).await;
        // A renewal may take no longer than the lease has left before its
        // last sixth: an unreachable store must not hold the answer back.
        let left = expires_at.0 - margin - EpochMillis::now().0;
        let renewal = held.store.acquire_with_limit(
            &lease.lock_name,
            &lease.owner,
            held.seconds,
            held.limit,
            EpochMillis::now(),
        );
        let Ok(outcome) = timeout(Duration::from_millis(left.max(0) as u64), renewal).await else {
            return format!(
                "no renewal before the lease ends at {expires_at} (the store did not answer)"
            );
        };
        match outcome {
            Ok(AcquireOutcome::Renewed(renewed))
                if renewed.fencing_token == lease.fencing_token =>
            {
                expires_at = renewed.expires_at;
                next = Instant::now() + every;
                continue;
            }
            Ok(AcquireOutcome::Held(contention)) => {
                let by = contention
                    .holders
                    .first()
                    .map(|h| h.owner.clone())
                    .unwrap_or_default();
                return format!("the lock was taken over by {by}");
            }
            Ok(other) => {
                return format!("the renewal answered {other:?}, not a renewal of the lease")
            }
            Err(error) => {
                if EpochMillis::now().0 >= expires_at.0 - margin {
                    return format!("no renewal before the lease ends at {expires_at} ({error})");
                }
                eprintln!("sfn-lock: renewal failed, trying again: {error}");
                next = Instant::now() + Duration::from_millis(250);
            }
        }
    }
}
