//! The operator's commands: `status` and `list` read (nothing is written),
//! `release --force` frees a lock by hand through the same owner-checked
//! release the functions use, so the fencing counter keeps rising.

use clap::Args;
use serde_json::{json, Value};
use sfn_lock::{
    EpochMillis, Grant, LockName, LockStore, LockView, Owner, ReleaseOutcome, DEFAULT_LIST_MAX,
    MAX_LIST_MAX,
};

use crate::store::open;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The store: dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH
    /// [default: LOCK_STORE_URL, or LOCK_TABLE_NAME]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// The lock's name.
    lock_name: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// The store: dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH
    /// [default: LOCK_STORE_URL, or LOCK_TABLE_NAME]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// Report at most N locks (S3, SSM: read at most N lock documents).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIST_MAX,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_LIST_MAX as u64))]
    max: usize,
}

#[derive(Args, Debug)]
pub struct ReleaseArgs {
    /// The store: dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH
    /// [default: LOCK_STORE_URL, or LOCK_TABLE_NAME]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Yes, free it: the holder is not told and may still be running.
    #[arg(long)]
    force: bool,
    /// Free only this holder's grant (one permit of a semaphore).
    #[arg(long, value_name = "ID")]
    owner: Option<String>,
    /// The lock's name.
    lock_name: String,
}

fn say(text: impl std::fmt::Display) {
    eprintln!("sfn-lock: {text}");
}

fn lock_name(text: &str) -> Result<LockName, u8> {
    LockName::new(text).map_err(|error| {
        say(error);
        2
    })
}

pub async fn status(args: StatusArgs) -> u8 {
    let name = match lock_name(&args.lock_name) {
        Ok(name) => name,
        Err(status) => return status,
    };
    let store = match open(args.store.as_deref()).await {
        Ok((store, _)) => store,
        Err(why) => return fail(why),
    };
    match store.inspect(&name).await {
        Ok(view) if args.json => println!("{}", view_json(&view, EpochMillis::now())),
        Ok(view) => print!("{}", describe(&view, EpochMillis::now())),
        Err(error) => return fail(format!("the store failed: {error}")),
    }
    0
}

pub async fn list(args: ListArgs) -> u8 {
    let store = match open(args.store.as_deref()).await {
        Ok((store, _)) => store,
        Err(why) => return fail(why),
    };
    let list = match store.list_held(args.max).await {
        Ok(list) => list,
        Err(error) => return fail(format!("the store failed: {error}")),
    };
    let now = EpochMillis::now();
    if args.json {
        let locks: Vec<Value> = list.locks.iter().map(|view| view_json(view, now)).collect();
        println!("{}", json!({"locks": locks, "truncated": list.truncated}));
        return 0;
    }
    // "None" only when the whole store was read: a listing cut short by its
    // bound (on S3 and SSM, a bound on documents read, held or free) proves nothing.
    if list.locks.is_empty() && !list.truncated {
        println!("no lock is held");
    }
    for view in &list.locks {
        for grant in &view.grants {
            println!(
                "{}\t{}",
                quoted(view.lock_name.as_str()),
                grant_line(grant, now)
            );
        }
    }
    if list.truncated {
        say(format!(
            "stopped at --max {} (held locks found on DynamoDB, lock documents read on S3 \
             and SSM): there may be more held locks",
            args.max
        ));
    }
    0
}

pub async fn release(args: ReleaseArgs) -> u8 {
    let name = match lock_name(&args.lock_name) {
        Ok(name) => name,
        Err(status) => return status,
    };
    if !args.force {
        say(format!(
            "refusing to free {} without --force: its holder is not told and may still be \
             running. Stop the holder first (e.g. stop its execution: the sweep then frees the \
             lock), or run again with --force",
            quoted(name.as_str())
        ));
        return 2;
    }
    let owner = match args.owner.as_deref().map(Owner::new).transpose() {
        Ok(owner) => owner,
        Err(error) => {
            say(error);
            return 2;
        }
    };
    let store = match open(args.store.as_deref()).await {
        Ok((store, _)) => store,
        Err(why) => return fail(why),
    };
    // Read first, so that a name or an owner that holds nothing writes nothing.
    let view = match store.inspect(&name).await {
        Ok(view) => view,
        Err(error) => return fail(format!("the store failed: {error}")),
    };
    let targets: Vec<&Grant> = match &owner {
        Some(owner) => view
            .grants
            .iter()
            .filter(|grant| grant.owner == owner.as_str())
            .collect(),
        None => view.grants.iter().collect(),
    };
    if targets.is_empty() {
        return match owner {
            None => {
                println!("{} is not held: nothing to free", quoted(name.as_str()));
                0
            }
            Some(owner) => fail(format!(
                "{} does not hold {}: nothing freed ({})",
                owner,
                quoted(name.as_str()),
                holders_text(&view)
            )),
        };
    }
    let by = operator();
    for grant in targets {
        // The owner's own release, as the sweep makes it: only the grant read
        // (or an older one) goes, never one the owner took since; a queue's
        // next waiter is handed the lock.
        let Ok(holder) = Owner::new(grant.owner.clone()) else {
            return fail(format!(
                "the store holds an invalid owner {:?}",
                grant.owner
            ));
        };
        let outcome = store
            .release_granted_before(&name, &holder, grant.acquired_at, EpochMillis::now())
            .await;
        let outcome = match outcome {
            Ok(ReleaseOutcome::Released) => "released",
            Ok(ReleaseOutcome::NotHeld) | Ok(ReleaseOutcome::HeldByOther(_)) => "already_gone",
            Err(error) => return fail(format!("the store failed: {error}")),
        };
        eprintln!(
            "{}",
            json!({"event": "forced_release", "lockName": name.as_str(), "owner": grant.owner,
                   "fencingToken": grant.fencing_token, "outcome": outcome, "by": by})
        );
        println!(
            "{} {} held by {} (fencing token {})",
            outcome.replace('_', " "),
            quoted(name.as_str()),
            grant.owner,
            grant.fencing_token
        );
    }
    0
}

fn fail(why: String) -> u8 {
    say(why);
    1
}

/// Who forced a release, for the log: the login name and the machine.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown-user".into());
    format!("{user}@{}", crate::store::host())
}

fn quoted(name: &str) -> String {
    format!("{name:?}")
}

fn holders_text(view: &LockView) -> String {
    match view.grants.is_empty() {
        true => "it is free".into(),
        false => {
            let owners: Vec<&str> = view.grants.iter().map(|g| g.owner.as_str()).collect();
            format!("held by {}", owners.join(", "))
        }
    }
}

fn grant_line(grant: &Grant, now: EpochMillis) -> String {
    let left = (grant.expires_at.0 - now.0) / 1000;
    let state = match grant.is_live(now) {
        true => format!("in {left} s"),
        false => format!("EXPIRED {} s ago, not yet taken over", -left),
    };
    format!(
        "{}\tfencing token {}\tacquired {}\texpires {} ({state})",
        grant.owner, grant.fencing_token, grant.acquired_at, grant.expires_at
    )
}

/// `status`'s text: the lock, then one line per grant.
fn describe(view: &LockView, now: EpochMillis) -> String {
    let name = quoted(view.lock_name.as_str());
    let token = match view.fencing_token {
        Some(token) => format!("last fencing token {token}"),
        None => "never taken".into(),
    };
    let live = view
        .grants
        .iter()
        .filter(|grant| grant.is_live(now))
        .count();
    let mut text = match live {
        0 => format!("{name}: free ({token})\n"),
        n => format!("{name}: held by {n} ({token})\n"),
    };
    for grant in &view.grants {
        text.push_str(&format!("  {}\n", grant_line(grant, now)));
    }
    if let Some(waiting) = view.queue_length.filter(|&n| n > 0) {
        text.push_str(&format!("  {waiting} waiting in the queue\n"));
    }
    text
}

fn view_json(view: &LockView, now: EpochMillis) -> Value {
    let holders: Vec<Value> = view
        .grants
        .iter()
        .map(|grant| {
            json!({"owner": grant.owner, "fencingToken": grant.fencing_token,
                   "acquiredAt": grant.acquired_at.to_rfc3339(),
                   "expiresAt": grant.expires_at.to_rfc3339(), "live": grant.is_live(now)})
        })
        .collect();
    json!({"lockName": view.lock_name.as_str(), "held": view.is_held(now), "holders": holders,
           "fencingToken": view.fencing_token, "queueLength": view.queue_length})
}
