//! `sfn-lock release --force LOCK`: frees a lock by hand, every holder
//! or one (`--owner`), through the owner-checked release the sweep makes.

use clap::Args;
use serde_json::json;
use sfn_lock::{AnyStore, EpochMillis, Grant, LockStore, LockView, Owner, ReleaseOutcome};

use super::show::quoted;
use super::{fail, lock_name, say};
use crate::store::{host, open};

#[derive(Args, Debug)]
pub struct ReleaseArgs {
    /// Yes, free it: the holder is not told and may still be running.
    #[arg(long)]
    force: bool,
    /// Free only this holder's grant (one permit of a semaphore).
    #[arg(long, value_name = "ID")]
    owner: Option<String>,
    /// The lock's name.
    #[arg(value_name = "LOCK")]
    lock_name: String,
}

pub async fn release(args: ReleaseArgs, store: Option<&str>) -> u8 {
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
    let store = match open(store).await {
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
        // DynamoDB's GetItem (consistent) and S3's GET see the newest write;
        // SSM's reads may lag one (AWS documents no consistency), so there
        // this answer says what it rests on. Confirming it instead, as a
        // release confirms `not_held` (the same document created as the
        // next generation), would write to a lock that holds nothing, which
        // this command never does (a mistyped name leaves no parameters).
        let (read, lag) = match store {
            AnyStore::Ssm(_) => (
                " as read just now",
                " (SSM's reads can lag a write by seconds: run again to be sure)",
            ),
            _ => ("", ""),
        };
        let lock = quoted(name.as_str());
        return match owner {
            None => {
                println!("{lock} is not held{read}: nothing to free{lag}");
                0
            }
            Some(owner) => fail(format!(
                "{owner} does not hold {lock}{read}: nothing freed ({}){lag}",
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

/// Who forced a release, for the log: the login name and the machine.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown-user".into());
    format!("{user}@{}", host())
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
