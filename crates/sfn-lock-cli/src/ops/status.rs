//! `sfn-lock status LOCK`: who holds the lock, read and never written; with
//! `--exit-code`, whether it is held in the exit status too, for scripts.

use clap::Args;
use sfn_lock::{EpochMillis, LockStore, LockView};

use super::show::{grant_line, quoted, view_json};
use super::{fail, lock_name};
use crate::store::open;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// Exit 0 if the lock is held (a live holder), 3 if it is free (never
    /// taken, released, or every lease expired), as `systemctl is-active`
    /// does; without it status is 0 either way. A store error stays 1.
    #[arg(long)]
    exit_code: bool,
    /// The lock's name.
    #[arg(value_name = "LOCK")]
    lock_name: String,
}

/// `status --exit-code`'s status for a free lock (LSB's "not running").
const FREE: u8 = 3;

pub async fn status(args: StatusArgs, store: Option<&str>) -> u8 {
    let name = match lock_name(&args.lock_name) {
        Ok(name) => name,
        Err(status) => return status,
    };
    let store = match open(store).await {
        Ok((store, _)) => store,
        Err(why) => return fail(why),
    };
    let view = match store.inspect(&name).await {
        Ok(view) => view,
        Err(error) => return fail(format!("the store failed: {error}")),
    };
    // One clock reading for the text, the JSON and the status, so that they agree.
    let now = EpochMillis::now();
    match args.json {
        true => println!("{}", view_json(&view, now)),
        false => print!("{}", describe(&view, now)),
    }
    match args.exit_code && !view.is_held(now) {
        true => FREE,
        false => 0,
    }
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
