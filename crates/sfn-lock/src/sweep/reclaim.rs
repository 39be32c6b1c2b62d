//! The reconciler's last step: reclaim the storage of locks nobody changes
//! (`LockStore::reclaim_idle`; on SSM a lock unchanged for seven minutes is
//! trimmed to its newest generation and `current`, `store/document/ssm/reclaim.rs`; the
//! other stores keep nothing per idle lock that costs). It gets what is left
//! of the run's time; work cut short is safe (deletions the next pass repeats).

use std::time::Duration;

use crate::ports::store::{LockStore, Reclaimed};
use crate::vocab::deadline::within;
use crate::vocab::error::LockError;

/// Locks one run reclaims a step of, at most.
pub const MAX_RECONCILE_RECLAIMS: usize = 20;

/// Runs the step within `time` (`None`: no deadline).
pub(crate) async fn reclaim<S: LockStore>(
    store: &S,
    max: usize,
    time: Option<Duration>,
) -> Result<Reclaimed, LockError> {
    match time {
        Some(time) if time.is_zero() => Ok(Reclaimed {
            truncated: true,
            ..Reclaimed::default()
        }),
        Some(time) => {
            within::<_, LockError>(time, async { Ok(store.reclaim_idle(max).await?) }).await
        }
        None => store.reclaim_idle(max).await.map_err(LockError::from),
    }
}
