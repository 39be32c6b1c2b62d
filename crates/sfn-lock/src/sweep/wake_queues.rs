//! The reconciler's second step: queues owed a hand-off or a wake-up that no
//! release brought them (a release cut short, a wake-up lost), each woken
//! within what is left of the run's budget.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use crate::ports::store::LockStore;
use crate::vocab::deadline::within;
use crate::vocab::error::{LockError, StoreError};
use crate::vocab::model::EpochMillis;

/// What one pass over the queues did.
#[derive(Default)]
pub(crate) struct QueuesWoken {
    pub woken: Vec<String>,
    pub failed: usize,
    /// More may be owed than this pass reached.
    pub truncated: bool,
}

/// Wakes up to `max` queues the store names.
pub(crate) async fn wake_queues<S: LockStore>(
    store: &S,
    max: usize,
    now: EpochMillis,
    deadline: Option<Instant>,
) -> QueuesWoken {
    let mut report = QueuesWoken::default();
    let left =
        |until: Option<Instant>| until.map(|until| until.saturating_duration_since(Instant::now()));
    let queues = match left(deadline) {
        Some(time) if time.is_zero() => {
            report.truncated = true;
            Ok(Vec::new())
        }
        time => bounded(time, store.queues_to_wake(max, now)).await,
    };
    let queues = match queues {
        Ok(queues) => queues,
        Err(error) => {
            warn!(error = %error, decision = "failed", "reconciler: could not list the queues to wake");
            report.failed += 1;
            report.truncated = true;
            Vec::new()
        }
    };
    if queues.len() >= max {
        report.truncated = true;
    }
    for lock_name in queues {
        let result = match left(deadline) {
            Some(time) if time.is_zero() => {
                report.truncated = true;
                break;
            }
            time => bounded(time, store.wake_queue(&lock_name, now)).await,
        };
        match result {
            Ok(true) => {
                info!(lock_name = %lock_name, decision = "woken",
                      "reconciler: handed the lock's queue what no release brought it");
                report.woken.push(lock_name.to_string());
            }
            Ok(false) => {
                info!(lock_name = %lock_name, decision = "nothing owed",
                      "reconciler: the lock's queue was owed nothing after all");
            }
            Err(error) => {
                warn!(lock_name = %lock_name, decision = "failed", error = %error,
                      "reconciler: could not wake the lock's queue; the next run tries again");
                report.failed += 1;
            }
        }
    }
    report
}

/// `work` within `time` if there is a bound; a cut is the store's silence.
pub(crate) async fn bounded<T>(
    time: Option<Duration>,
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, LockError> {
    // On the heap: a store call's future is kilobytes in a debug build, and
    // the reconciler awaits several in one run (a test thread's 2 MiB stack
    // overflowed once with them all inline).
    let work = Box::pin(work);
    match time {
        Some(time) => within::<_, LockError>(time, async { Ok(work.await?) }).await,
        None => Ok(work.await?),
    }
}
