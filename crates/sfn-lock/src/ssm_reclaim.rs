//! Reclaiming the parameters of SSM locks nobody uses (issue 23: standard
//! parameters are limited to 10,000 per account and Region, shared with
//! everything else in it).
//!
//! A lock free and unchanged for [`RECLAIM_AFTER_MILLIS`] of SSM's time is
//! reclaimed in two steps, by the scheduled sweep (`reconcile.rs`):
//! 1. **Close:** a tombstone is created as its next generation, like any
//!    change: of all writers that read the same generation, one creates the
//!    next, so a writer racing the sweep either wins (the lock is in use
//!    again) or builds on the tombstone. `current` repeats it.
//! 2. **Empty:** once the tombstone is the newest for as long again,
//!    `current` is written with it once more and every generation up to
//!    and including it is deleted. Only `current` stays: one parameter per
//!    idle lock name. A reader finds the tombstone there (`ssm_read.rs`)
//!    and the next change creates the generation after it.
//!
//! Why deleting the newest generation is safe here: a writer that read a
//! generation before the tombstone and creates its successor late lands more
//! than [`RECLAIM_AFTER_MILLIS`] after its read, beyond the write window, and
//! is not answered for; one that read the tombstone creates the generation
//! after it, which nothing deletes. Nothing here reads a caller's clock.

use std::collections::BTreeSet;

use serde::Serialize;
use tracing::{info, warn};

use crate::document_store::Documents;
use crate::error::{classify, StoreError};
use crate::listing_pace;
use crate::model::LockName;
use crate::ssm::SsmDocuments;
use crate::ssm_generations::{KEEP_SUPERSEDED_MILLIS, WRITE_WINDOW_MILLIS};
use crate::ssm_window::SsmRead;
use crate::store_names::decode_name;

/// How long a lock stays free and unchanged before each step.
pub const RECLAIM_AFTER_MILLIS: i64 = KEEP_SUPERSEDED_MILLIS + WRITE_WINDOW_MILLIS;

/// What one reclaim pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reclaimed {
    /// Lock names read.
    pub looked_at: usize,
    /// Tombstones created (step 1).
    pub closed: usize,
    /// Locks left with `current` alone (step 2).
    pub emptied: usize,
    /// Locks whose read or write failed (logged); the next pass tries again.
    pub failed: usize,
    /// More lock names than the pass looked at may exist.
    pub truncated: bool,
}

impl SsmDocuments {
    pub(crate) async fn reclaim_idle(&self, max: usize) -> Result<Reclaimed, StoreError> {
        let (names, truncated) = self.with_generations(max).await?;
        let mut done = Reclaimed {
            truncated,
            ..Reclaimed::default()
        };
        for name in names {
            done.looked_at += 1;
            self.before_listing_read().await;
            match self.reclaim_one(&name).await {
                Ok(Some(Step::Closed)) => done.closed += 1,
                Ok(Some(Step::Emptied)) => done.emptied += 1,
                Ok(None) => {}
                Err(error) => {
                    warn!(lock_name = name.as_str(), error = %error, "could not reclaim an idle lock");
                    done.failed += 1;
                }
            }
        }
        Ok(done)
    }

    async fn reclaim_one(&self, lock_name: &LockName) -> Result<Option<Step>, StoreError> {
        let read = self.read_newest(lock_name).await?;
        let Some(envelope) = &read.envelope else {
            return Ok(None);
        };
        if read.gone || !envelope.lock.holders.is_empty() || !idle(&read) {
            return Ok(None);
        }
        if !envelope.closed {
            let closed = self
                .create_next(lock_name, &read, &envelope.lock, true)
                .await?;
            if closed {
                info!(
                    lock_name = lock_name.as_str(),
                    generation = envelope.generation + 1,
                    "closed an idle lock: its generations go after the next wait"
                );
            }
            return Ok(closed.then_some(Step::Closed));
        }
        // `current` holds the tombstone before any generation goes: a
        // reader never finds a hint naming a deleted, open generation.
        let value = serde_json::to_string(envelope)
            .map_err(|error| StoreError::Unavailable(format!("lock document: {error}")))?;
        self.put(self.current_name(lock_name), value, true).await?;
        let all = envelope.tail..envelope.generation + 1;
        if !self.delete_generations(lock_name, all).await {
            return Err(StoreError::Unavailable(
                "DeleteParameters failed; the next pass tries again".into(),
            ));
        }
        info!(
            lock_name = lock_name.as_str(),
            generation = envelope.generation,
            "emptied an idle lock: only its current parameter stays"
        );
        Ok(Some(Step::Emptied))
    }
}

impl SsmDocuments {
    /// Up to `max` lock names that still have a generation (an emptied lock
    /// has `current` alone and is passed over, so each pass gets further),
    /// listed as the operators' listing is: paced, 10 parameters a page.
    async fn with_generations(&self, max: usize) -> Result<(Vec<LockName>, bool), StoreError> {
        let mut names = BTreeSet::new();
        let mut next_token = None;
        loop {
            listing_pace::turn(1).await;
            let page = self
                .client
                .get_parameters_by_path()
                .path(&self.path)
                .recursive(true)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|error| classify("GetParametersByPath", error))?;
            for parameter in page.parameters() {
                let Some((folder, last)) = parameter
                    .name()
                    .and_then(|name| name.strip_prefix(&self.path)?.strip_prefix('/'))
                    .and_then(|rest| rest.split_once('/'))
                else {
                    continue;
                };
                let name = decode_name(folder).and_then(|name| LockName::new(name).ok());
                if let (Some(name), false) = (name, last == "current" || last.contains('/')) {
                    names.insert(name);
                    if names.len() > max {
                        names.pop_last();
                        return Ok((names.into_iter().collect(), true));
                    }
                }
            }
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Ok((names.into_iter().collect(), false)),
            }
        }
    }
}

enum Step {
    Closed,
    Emptied,
}

/// Free and unchanged long enough, by SSM's clock.
fn idle(read: &SsmRead) -> bool {
    read.read_at - read.modified_at > RECLAIM_AFTER_MILLIS
}
