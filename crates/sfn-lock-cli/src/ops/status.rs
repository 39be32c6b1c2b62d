//! `sfn-lock status LOCK_NAME`: who holds the lock, read and never written.

use clap::Args;
use sfn_lock::{EpochMillis, LockStore, LockView};

use super::show::{grant_line, quoted, view_json};
use super::{fail, lock_name};
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
