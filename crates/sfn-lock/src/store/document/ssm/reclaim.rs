//! Trimming SSM locks nobody changes any more (issue 23: standard parameters
//! are limited to 10,000 per account and Region, shared with everything else
//! in it).
//!
//! Writers delete old generations only before their own create, so a lock's
//! last change leaves behind the generations superseded in the five minutes
//! before it, and a create that landed late beside the chain (not answered
//! for) stays below the oldest one kept. The scheduled sweep (`reconcile.rs`)
//! trims each lock whose newest generation is older than
//! [`RECLAIM_AFTER_MILLIS`] of SSM's time: every generation below the newest
//! goes, found by listing the lock's folder. The newest and `current` stay:
//! two parameters per idle lock name, whoever holds it.
//!
//! Why this is safe: the deletion rule (`store/document/ssm/generations.rs`) lets a
//! generation go once a newer one existed more than five minutes before the
//! deleting read, and the newest generation existed at its
//! `LastModifiedDate`, more than that before this read. A writer that read
//! an older generation and creates its successor after the deletion lands
//! beyond the write window and is not answered for; the newest is never
//! deleted, so a writer that read it creates the generation after it, as
//! always. Nothing here reads a caller's clock.

use std::collections::BTreeMap;

use crate::ports::store::Reclaimed;
use tracing::{info, warn};

use crate::aws::errors::classify;
use crate::aws::service_clock::ServiceDate;
use crate::ports::listing_pace;
use crate::store::document::documents::Documents;
use crate::store::document::ssm::generations::{KEEP_SUPERSEDED_MILLIS, WRITE_WINDOW_MILLIS};
use crate::store::document::ssm::path::SsmDocuments;
use crate::store::document::ssm::window::no_date;
use crate::store::names::decode_name;
use crate::vocab::error::StoreError;
use crate::vocab::model::LockName;

/// How long a lock's newest generation must be unchanged before its older
/// ones are trimmed: the keep time, and the write window besides.
pub const RECLAIM_AFTER_MILLIS: i64 = KEEP_SUPERSEDED_MILLIS + WRITE_WINDOW_MILLIS;

/// A lock folder as the listing shows it.
#[derive(Default)]
struct Seen {
    generations: usize,
    /// Every generation seen was older than the wait, by the page's `Date`.
    all_old: bool,
}

impl SsmDocuments {
    pub(crate) async fn reclaim_idle(&self, max: usize) -> Result<Reclaimed, StoreError> {
        let (names, truncated) = self.trimmable(max).await?;
        let mut done = Reclaimed {
            truncated,
            ..Reclaimed::default()
        };
        for name in names {
            done.looked_at += 1;
            self.before_listing_read().await;
            match self.trim(&name).await {
                Ok(0) => {}
                Ok(deleted) => {
                    done.trimmed += 1;
                    done.deleted += deleted;
                }
                Err(error) => {
                    warn!(lock_name = name.as_str(), error = %error, "could not trim an idle lock");
                    done.failed += 1;
                }
            }
        }
        Ok(done)
    }

    /// Deletes every generation below the newest, if the newest is old
    /// enough; how many it deleted.
    async fn trim(&self, lock_name: &LockName) -> Result<usize, StoreError> {
        let read = self.read_newest(lock_name).await?;
        let Some(newest) = &read.envelope else {
            return Ok(0);
        };
        if read.read_at - read.modified_at <= RECLAIM_AFTER_MILLIS {
            return Ok(0);
        }
        let prefix = format!("{}/", self.lock_path(lock_name));
        let older: Vec<String> = self
            .parameters_under(&self.lock_path(lock_name))
            .await?
            .iter()
            .filter_map(|parameter| parameter.name())
            .filter(|name| {
                name.strip_prefix(&prefix)
                    .and_then(|last| last.parse::<u64>().ok())
                    .is_some_and(|generation| generation < newest.generation)
            })
            .map(str::to_string)
            .collect();
        for batch in older.chunks(10) {
            self.client
                .delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|error| classify("DeleteParameters", error))?;
        }
        if !older.is_empty() {
            info!(
                lock_name = lock_name.as_str(),
                generation = newest.generation,
                deleted = older.len(),
                "trimmed an idle lock to its newest generation and current"
            );
        }
        Ok(older.len())
    }

    /// Up to `max` lock names the listing shows with more than one
    /// generation, all older than the wait: a trimmed lock (one generation)
    /// and a busy one are passed over, so each pass gets further. Paced as
    /// the operators' listing is.
    async fn trimmable(&self, max: usize) -> Result<(Vec<LockName>, bool), StoreError> {
        let mut seen: BTreeMap<LockName, Seen> = BTreeMap::new();
        let mut next_token = None;
        loop {
            listing_pace::turn(1).await;
            let date = ServiceDate::default();
            let page = self
                .client
                .get_parameters_by_path()
                .path(&self.path)
                .recursive(true)
                .set_next_token(next_token)
                .customize()
                .interceptor(date.clone())
                .send()
                .await
                .map_err(|error| classify("GetParametersByPath", error))?;
            let now = date
                .millis()
                .ok_or_else(|| no_date("GetParametersByPath"))?;
            for parameter in page.parameters() {
                let Some((folder, last)) = parameter
                    .name()
                    .and_then(|name| name.strip_prefix(&self.path)?.strip_prefix('/'))
                    .and_then(|rest| rest.split_once('/'))
                else {
                    continue;
                };
                let Some(name) = decode_name(folder).and_then(|name| LockName::new(name).ok())
                else {
                    continue;
                };
                if last.parse::<u64>().is_err() {
                    continue;
                }
                let old = parameter
                    .last_modified_date()
                    .and_then(|date| date.to_millis().ok())
                    .is_some_and(|at| now - at > RECLAIM_AFTER_MILLIS);
                let entry = seen.entry(name).or_insert(Seen {
                    generations: 0,
                    all_old: true,
                });
                entry.generations += 1;
                entry.all_old &= old;
            }
            let ready = seen
                .values()
                .filter(|s| s.generations > 1 && s.all_old)
                .count();
            match page.next_token {
                Some(token) if ready <= max => next_token = Some(token),
                rest => {
                    let names: Vec<LockName> = seen
                        .into_iter()
                        .filter(|(_, s)| s.generations > 1 && s.all_old)
                        .map(|(name, _)| name)
                        .collect();
                    let truncated = rest.is_some() || names.len() > max;
                    return Ok((names.into_iter().take(max).collect(), truncated));
                }
            }
        }
    }
}
