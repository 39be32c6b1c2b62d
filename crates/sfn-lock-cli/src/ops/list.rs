//! `sfn-lock list`: every lock with a grant, read and never written. On SSM
//! the store paces the listing below the account's shared Parameter Store
//! throughput (`sfn_lock::ports::listing_pace`), so a long one takes minutes: it
//! says up front about how long `--max` locks take, shows its progress on
//! stderr, and sums up what it sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use sfn_lock::ports::listing_pace::{
    listing_estimate, watched, ListingProgress, LISTING_REQUESTS_PER_SECOND,
};
use sfn_lock::{EpochMillis, LockStore, StoreUrl, DEFAULT_LIST_MAX, MAX_LIST_MAX};

use super::show::{grant_line, quoted, view_json};
use super::{fail, say};
use crate::store::open;

/// An SSM listing says how far it got every this many requests (10 s at
/// the rate): often enough to show it is alive, rarely enough to read.
pub const PROGRESS_EVERY_REQUESTS: u64 = 50;

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// Report at most N locks (S3, SSM: read at most N lock documents; SSM
    /// paces its requests at 5 a second, about half a second a lock).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIST_MAX,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_LIST_MAX as u64))]
    max: usize,
}

pub async fn list(args: ListArgs, store: Option<&str>) -> u8 {
    let (store, url) = match open(store).await {
        Ok(opened) => opened,
        Err(why) => return fail(why),
    };
    let ssm = matches!(url, StoreUrl::Ssm { .. });
    if ssm {
        say(up_front(args.max));
    }
    let started = Instant::now();
    let shown = AtomicU64::new(0);
    let report = move |done: &ListingProgress| {
        let step = done.requests / PROGRESS_EVERY_REQUESTS;
        if shown.swap(step, Ordering::SeqCst) < step {
            say(progress(done, started.elapsed()));
        }
    };
    let (list, done) = watched(report, store.list_held(args.max)).await;
    let list = match list {
        Ok(list) => list,
        Err(error) => return fail(format!("the store failed: {error}")),
    };
    if ssm {
        say(format!(
            "listed: {} requests in {} (pages of parameters: {}, locks read: {})",
            done.requests,
            about(started.elapsed()),
            done.pages,
            done.locks_read
        ));
    }
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

/// What an SSM listing of up to `max` locks costs in time, before it starts.
fn up_front(max: usize) -> String {
    let (requests, takes) = listing_estimate(max);
    format!(
        "listing up to {max} locks on SSM at {LISTING_REQUESTS_PER_SECOND} requests a second, \
         to leave the account's shared Parameter Store throughput to the locks' own calls: \
         about {requests} requests, up to about {} (less with fewer locks, more if they keep \
         many old generations)",
        about(takes)
    )
}

fn progress(done: &ListingProgress, elapsed: Duration) -> String {
    format!(
        "listing: {} requests in {} (pages of parameters: {}, locks found: {}, read: {})",
        done.requests,
        about(elapsed),
        done.pages,
        done.locks_found,
        done.locks_read
    )
}

/// A duration as an operator reads it: seconds, then minutes, then hours.
fn about(time: Duration) -> String {
    let seconds = time.as_secs_f64().round() as u64;
    match seconds {
        0..120 => format!("{seconds} s"),
        120..7200 => format!("{} min", seconds.div_ceil(60)),
        _ => {
            let minutes = seconds.div_ceil(60);
            format!("{} h {} min", minutes / 60, minutes % 60)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_reads_in_seconds_minutes_or_hours() {
        assert!(
            up_front(100).contains("up to about 46 s"),
            "{}",
            up_front(100)
        );
        assert!(up_front(100).contains("5 requests a second"));
        assert!(
            up_front(1000).contains("up to about 8 min"),
            "{}",
            up_front(1000)
        );
        assert!(
            up_front(10_000).contains("up to about 77 min"),
            "{}",
            up_front(10_000)
        );
        assert_eq!(about(Duration::from_secs(119)), "119 s");
        assert_eq!(about(Duration::from_secs(7_199)), "120 min");
        assert_eq!(about(Duration::from_secs(7_260)), "2 h 1 min");
        assert_eq!(about(Duration::from_secs(10_799)), "3 h 0 min");
    }
}
