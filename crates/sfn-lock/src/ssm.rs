//! The lock on SSM Parameter Store (`LOCK_STORE_URL=ssm:///PATH`). SSM can
//! create a parameter only if absent (`Overwrite=false`) but has no
//! compare-and-swap, so a lock is a sequence of generations,
//! `/PATH/<encoded name>/<generation>`, each holding the whole lock document:
//! a change creates generation N+1 after reading generation N, and of all
//! writers that read N only one can create N+1; that create is the arbiter.
//! `/PATH/<encoded name>/current` repeats the newest generation, overwritten
//! after each create: a read probes the hint's own generation and the nine
//! after it (one `GetParameters`), and lists the lock's generations when that
//! finds none, so a hint that lags, is far behind or is gone misleads nobody.
//! Old generations are deleted behind (`ssm_generations.rs`; DESIGN.md,
//! "SSM store"). A release's answer without a write is confirmed by creating
//! the next generation (`confirm`): SSM's reads may be stale.

use aws_sdk_ssm::Client;
use tracing::warn;

use crate::document::LockDoc;
use crate::document_store::{DocumentStore, Documents};
use crate::error::{classify, StoreError};
use crate::listing_pace;
use crate::model::{EpochMillis, LockName, Owner};
use crate::ssm_calls::fit;
use crate::ssm_generations::{backlog_full, next_envelope, Base};
use crate::ssm_markers::TOKEN_DIGITS;
use crate::ssm_window::within_window;
pub use crate::ssm_window::SsmRead;
use crate::store_names::{decode_name, encode_name, owner_hash, OWNER_HASH_DIGITS};

pub use crate::ssm_generations::{KEEP_SUPERSEDED_MILLIS, MAX_KEPT_GENERATIONS};

/// SSM's limit on a name is 1011 characters including the ARN prefix
/// (`arn:aws:ssm:REGION:ACCOUNT:parameter`); 64 covers that prefix in every
/// partition and Region, so names are kept to the rest.
pub const MAX_NAME_CHARS: usize = 1011 - 64;
/// SSM allows at most 15 levels in a name.
pub const MAX_LEVELS: usize = 15;
/// A standard parameter's value holds 4 KB (advanced ones cost money).
pub const MAX_VALUE_BYTES: usize = 4096;
/// Generations are numbered with this many digits, so they sort as text too.
const GENERATION_DIGITS: usize = 20;

/// The lock on SSM.
pub type SsmStore = DocumentStore<SsmDocuments>;

#[derive(Clone, Debug)]
pub struct SsmDocuments {
    pub(crate) client: Client,
    /// Begins with `/`, never ends with one.
    pub(crate) path: String,
}

impl SsmStore {
    pub fn ssm(client: Client, path: impl Into<String>) -> Self {
        DocumentStore::new(SsmDocuments {
            client,
            path: path.into(),
        })
    }
}

impl SsmDocuments {
    pub(crate) fn lock_path(&self, lock_name: &LockName) -> String {
        format!("{}/{}", self.path, encode_name(lock_name.as_str()))
    }

    pub(crate) fn generation_name(&self, lock_name: &LockName, generation: u64) -> String {
        format!(
            "{}/{generation:0width$}",
            self.lock_path(lock_name),
            width = GENERATION_DIGITS
        )
    }

    pub(crate) fn current_name(&self, lock_name: &LockName) -> String {
        format!("{}/current", self.lock_path(lock_name))
    }

    pub(crate) fn owner_path(&self, owner: &Owner) -> String {
        format!("{}/.owners/{}", self.path, owner_hash(owner.as_str()))
    }

    /// Refuses a lock name whose marker folder, plus `extra` characters and
    /// at `levels` below the path, SSM could not name.
    fn check_depth(
        &self,
        lock_name: &LockName,
        extra: usize,
        levels: usize,
    ) -> Result<(), StoreError> {
        let chars = self.path.len()
            + "/.owners/".len()
            + OWNER_HASH_DIGITS
            + 1
            + encode_name(lock_name.as_str()).len()
            + extra;
        let levels = self.path.matches('/').count() + levels;
        let rule = if chars > MAX_NAME_CHARS {
            format!(
                "is too long for this SSM store: encoded under the path it needs a \
                 {chars}-character parameter name, and this store allows {MAX_NAME_CHARS}"
            )
        } else if levels > MAX_LEVELS {
            format!("cannot be stored under this SSM path: its names would have {levels} levels, SSM allows {MAX_LEVELS}")
        } else {
            return Ok(());
        };
        Err(StoreError::Refused {
            field: "lockName".into(),
            rule,
        })
    }

    /// Creates the generation after `read` holding `doc`; `false` if another
    /// writer's came first (or it landed too late to answer for).
    pub(crate) async fn create_next(
        &self,
        lock_name: &LockName,
        read: &SsmRead,
        doc: &LockDoc,
    ) -> Result<bool, StoreError> {
        let base = read.envelope.as_ref().map(|envelope| Base {
            envelope,
            modified_at: read.modified_at,
            read_at: read.read_at,
        });
        let (mut next, deletable) = next_envelope(base, doc.clone(), true);
        // Deleted before the create: they may go whoever wins it, and a create
        // that lands unseen (its answer lost) leaves none behind undeleted.
        let deletes_failed =
            !deletable.is_empty() && !self.delete_generations(lock_name, deletable).await;
        if deletes_failed {
            next = next_envelope(base, doc.clone(), false).0;
        }
        // A grant brings a holder the read did not have (the count may stay,
        // when it replaces an expired one).
        let before = read
            .envelope
            .as_ref()
            .map(|read| read.lock.holders.as_slice())
            .unwrap_or_default();
        let grant = doc.holders.iter().any(|holder| {
            !before
                .iter()
                .any(|b| b.owner == holder.owner && b.fencing_token == holder.fencing_token)
        });
        let frees = doc.holders.len() < before.len();
        // A busy lock keeps many generations for five minutes; only one
        // whose old generations cannot be deleted is stopped from growing:
        // nothing but a release (which frees a holder) is written then, so
        // its generations stay bounded by the bound plus its holders.
        if !frees && deletes_failed && backlog_full(&next) {
            return Err(StoreError::Misconfigured(format!(
                "lock {:?} keeps {} old generations: the SSM store cannot delete them \
                 (is ssm:DeleteParameters denied? see the log); it takes no grant, renewal \
                 or confirmation until they go, and releases still work",
                lock_name.as_str(),
                next.generation - next.tail
            )));
        }
        next.read_at = Some(read.read_at);
        let value = fit(&mut next, grant)?;
        let name = self.generation_name(lock_name, next.generation);
        let Some(landed_at) = self.put(name, value.clone(), false).await? else {
            return Ok(false);
        };
        // Too late to answer for: decided again from a fresh read, which
        // finds this change (a slow but true create) or the chain without it.
        if !within_window(lock_name, read, landed_at, next.generation)? {
            return Ok(false);
        }
        // The change is made; a lagging hint costs the next reader a probe.
        if let Err(error) = self.put(self.current_name(lock_name), value, true).await {
            warn!(lock_name = lock_name.as_str(), error = %error, "could not update the current-generation hint");
        }
        Ok(true)
    }
}

impl Documents for SsmDocuments {
    type Version = SsmRead;

    fn check_name(&self, lock_name: &LockName) -> Result<(), StoreError> {
        // The folder of the owner's markers for the lock is the longest and
        // deepest name every call needs (a release, the sweep, a status).
        self.check_depth(lock_name, 0, 3)
    }

    fn check_grant_name(&self, lock_name: &LockName) -> Result<(), StoreError> {
        // A grant's marker adds its token: only a grant needs that name, so
        // a lock taken before the markers carried tokens can still be freed.
        self.check_depth(lock_name, 1 + TOKEN_DIGITS, 4)
    }

    async fn read(&self, lock_name: &LockName) -> Result<Option<(SsmRead, LockDoc)>, StoreError> {
        let read = self.read_newest(lock_name).await?;
        // A lock never used has a document never written (format 0).
        let doc = read
            .envelope
            .as_ref()
            .map(|envelope| envelope.lock.clone())
            .unwrap_or_default();
        Ok(Some((read, doc)))
    }

    async fn write(
        &self,
        lock_name: &LockName,
        read: Option<&SsmRead>,
        doc: &LockDoc,
        _: EpochMillis,
    ) -> Result<bool, StoreError> {
        let read = read.ok_or_else(|| {
            StoreError::Unavailable("the SSM store writes only after its own read".into())
        })?;
        self.create_next(lock_name, read, doc).await
    }

    async fn confirm(
        &self,
        lock_name: &LockName,
        _: &Owner,
        read: Option<&SsmRead>,
        doc: Option<&LockDoc>,
        now: EpochMillis,
    ) -> Result<bool, StoreError> {
        // SSM's reads may be stale: the same document, created as the next
        // generation, proves the read was the newest when it landed.
        let doc = doc.cloned().unwrap_or_default();
        let doc = LockDoc {
            format: 1,
            updated_at: now.0,
            ..doc
        };
        self.write(lock_name, read, &doc, now).await
    }

    async fn mark(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        token: u64,
    ) -> Result<(), StoreError> {
        self.put_marker(owner, lock_name, token).await
    }

    async fn unmark(&self, owner: &Owner, lock_name: &LockName) -> Result<(), StoreError> {
        self.delete_markers(owner, lock_name).await
    }

    async fn unmark_ended(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        doc: Option<&LockDoc>,
    ) -> Result<(), StoreError> {
        // A lock never granted has no ended grant to unmark.
        let Some(doc) = doc.filter(|doc| doc.fencing_token > 0) else {
            return Ok(());
        };
        let held: Vec<u64> = (doc.holders.iter())
            .filter(|holder| holder.owner == owner.as_str())
            .map(|holder| holder.fencing_token)
            .collect();
        self.delete_ended_markers(owner, lock_name, doc.fencing_token, &held)
            .await
    }

    /// `GetParametersByPath` under the path, recursive: every lock's
    /// generations and hint (10 a page), one name per lock folder; the
    /// `.owners` folder and names that are not encoded lock names are passed
    /// over. Paced with the reads after it (`listing_pace.rs`): a listing
    /// of thousands of locks must not take the locks' own throughput.
    async fn names(&self, max: usize) -> Result<(Vec<LockName>, bool), StoreError> {
        let mut names = std::collections::BTreeSet::new();
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
                let name = parameter
                    .name()
                    .and_then(|name| name.strip_prefix(&self.path)?.strip_prefix('/'))
                    .and_then(|rest| rest.split_once('/'))
                    .and_then(|(folder, _)| decode_name(folder))
                    .and_then(|name| LockName::new(name).ok());
                if let Some(name) = name {
                    names.insert(name);
                    if names.len() > max {
                        names.pop_last();
                        listing_pace::record(|done| done.pages += 1);
                        return Ok((names.into_iter().collect(), true));
                    }
                }
            }
            listing_pace::record(|done| {
                done.pages += 1;
                done.locks_found = names.len();
            });
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Ok((names.into_iter().collect(), false)),
            }
        }
    }

    async fn before_listing_read(&self) {
        listing_pace::turn(listing_pace::LOCK_READ_REQUESTS).await;
        listing_pace::record(|done| done.locks_read += 1);
    }

    async fn reclaim_idle(&self, max: usize) -> Result<crate::store::Reclaimed, StoreError> {
        SsmDocuments::reclaim_idle(self, max).await
    }

    async fn marked(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        self.marked_locks(owner).await
    }
}
