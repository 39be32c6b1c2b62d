//! [`LockStore`] for stores that keep a lock as one document and can replace
//! it only if it is still the version read ([`Documents`]: S3, SSM). Each
//! call reads the document, decides (`doc.rs`), and writes it back
//! conditionally; a write that lost to another decides afresh from a new read.

use tracing::debug;

use crate::ports::store::LockStore;
use crate::store::document::doc::{
    decide_acquire, decide_release, AcquireStep, LockDoc, ReleaseStep,
};
pub use crate::store::document::documents::Documents;
use crate::store::ids::release_id;
use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::vocab::request::{LeaseSeconds, Limit};
use crate::vocab::view::{Grant, LockList, LockView};

/// Rounds one call may lose to other writers before it answers
/// `LockStoreUnavailable` (a caller within its wait bound tries again). A lost
/// round means another writer's decision landed: usually the next read answers.
pub const MAX_ROUNDS: usize = 8;

/// The lock contract on any [`Documents`].
#[derive(Clone, Debug)]
pub struct DocumentStore<D> {
    pub documents: D,
}

impl<D: Documents> DocumentStore<D> {
    pub fn new(documents: D) -> Self {
        DocumentStore { documents }
    }

    async fn release_any(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: Option<EpochMillis>,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.documents.check_name(lock_name)?;
        // One id per call: a write whose answer was lost is found by it.
        let release_id = release_id();
        for round in 1..=MAX_ROUNDS {
            let read = self.documents.read(lock_name).await?;
            let (version, doc) = split(&read);
            // Set when a grant of the owner's was made after this call's
            // release landed: its marker stays.
            let mut later_grant = false;
            let outcome = match decide_release(doc, owner, &release_id, granted_before, now) {
                ReleaseStep::Write(next) => {
                    if !self.documents.write(lock_name, version, &next, now).await? {
                        debug!(
                            lock_name = lock_name.as_str(),
                            round, "release lost a round to another writer"
                        );
                        continue;
                    }
                    ReleaseOutcome::Released
                }
                // Found by this call's own release record: it landed in an
                // earlier round, so a grant of the owner's read now is later.
                ReleaseStep::Answer(ReleaseOutcome::Released) => {
                    later_grant = doc
                        .is_some_and(|doc| doc.holders.iter().any(|h| h.owner == owner.as_str()));
                    ReleaseOutcome::Released
                }
                ReleaseStep::Answer(outcome) => {
                    if !self
                        .documents
                        .confirm(lock_name, owner, version, doc, now)
                        .await?
                    {
                        continue;
                    }
                    outcome
                }
            };
            // The marker goes once the owner's grant is freed, unless a later
            // grant of the owner's needs it. Otherwise only the sweep removes
            // it (its owner has ended; a later grant of its own stays): a
            // release-lock that found nothing may run beside the same owner's
            // acquire, whose marker must stay.
            let unmark = match (&outcome, granted_before) {
                (ReleaseOutcome::Released, _) => !later_grant,
                (ReleaseOutcome::HeldByOther(h), Some(_)) => h.owner != owner.as_str(),
                (_, Some(_)) => true,
                (_, None) => false,
            };
            // An owner never swept was never marked (the acquire's rule).
            if unmark && owner.may_be_swept() {
                self.documents.unmark(owner, lock_name).await?;
            } else if owner.may_be_swept() {
                // A release of this grant cut before its marker's delete
                // (Step Functions' retry finds nothing to free) must not
                // leave the marker to the end event's sweep alone: EventBridge
                // delivers that on a best-effort basis.
                self.documents.unmark_ended(owner, lock_name, doc).await?;
            }
            return Ok(outcome);
        }
        Err(lost_rounds(lock_name, "release"))
    }
}

fn split<V>(read: &Option<(V, LockDoc)>) -> (Option<&V>, Option<&LockDoc>) {
    match read {
        Some((version, doc)) => (Some(version), Some(doc)),
        None => (None, None),
    }
}

/// The lock as its document records it.
fn view_of(lock_name: &LockName, doc: Option<&LockDoc>) -> LockView {
    // A document never written (format 0: SSM's read of a lock without any
    // generation) is no document.
    let Some(doc) = doc.filter(|doc| doc.format != 0) else {
        return LockView::new(lock_name.clone(), Vec::new());
    };
    let grants = doc.holders.iter().map(|holder| Grant {
        owner: holder.owner.clone(),
        fencing_token: holder.fencing_token,
        acquired_at: EpochMillis(holder.acquired_at),
        expires_at: EpochMillis(holder.expires_at),
    });
    let mut view = LockView::new(lock_name.clone(), grants.collect());
    view.fencing_token = Some(doc.fencing_token);
    view
}

fn lost_rounds(lock_name: &LockName, call: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "lock {lock_name:?} changed {MAX_ROUNDS} times during one {call}"
    ))
}

impl<D: Documents> LockStore for DocumentStore<D> {
    async fn acquire_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        self.documents.check_grant_name(lock_name)?;
        let mut marked = None;
        for round in 1..=MAX_ROUNDS {
            let read = self.documents.read(lock_name).await?;
            let (version, doc) = split(&read);
            match decide_acquire(doc, (lock_name, owner), lease, limit, now) {
                AcquireStep::Held(contention) => return Ok(AcquireOutcome::Held(contention)),
                AcquireStep::Write(next, outcome) => {
                    // The marker before the grant: no grant the sweep may
                    // look for is ever unmarked; a renewal marks again,
                    // mending a marker lost since. A round lost to another
                    // grant marks this one's token. An owner never swept
                    // (the CLI's) is not marked: nothing would delete it.
                    let token = next
                        .holders
                        .iter()
                        .find(|holder| holder.owner == owner.as_str())
                        .map_or(next.fencing_token, |holder| holder.fencing_token);
                    if marked != Some(token) && owner.may_be_swept() {
                        self.documents.mark(owner, lock_name, token).await?;
                        marked = Some(token);
                    }
                    if self.documents.write(lock_name, version, &next, now).await? {
                        return Ok(outcome);
                    }
                    debug!(
                        lock_name = lock_name.as_str(),
                        owner = owner.as_str(),
                        round,
                        "acquire lost a round to another writer; deciding again"
                    );
                }
            }
        }
        Err(lost_rounds(lock_name, "acquire"))
    }

    async fn release_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        _limit: Limit,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_any(lock_name, owner, None, now).await
    }

    async fn release_granted_before(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: EpochMillis,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_any(lock_name, owner, Some(granted_before), now)
            .await
    }

    async fn locks_held_by(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        self.documents.marked(owner).await
    }

    async fn inspect(&self, lock_name: &LockName) -> Result<LockView, StoreError> {
        self.documents.check_name(lock_name)?;
        let read = self.documents.read(lock_name).await?;
        Ok(view_of(lock_name, split(&read).1))
    }

    /// One read per name listed: S3 and SSM keep no index of held locks.
    async fn reclaim_idle(&self, max: usize) -> Result<crate::ports::store::Reclaimed, StoreError> {
        self.documents.reclaim_idle(max).await
    }

    async fn list_held(&self, max: usize) -> Result<LockList, StoreError> {
        let (names, truncated) = self.documents.names(max).await?;
        let mut list = LockList {
            locks: Vec::new(),
            truncated,
        };
        for name in names {
            self.documents.before_listing_read().await;
            let read = self.documents.read(&name).await?;
            let view = view_of(&name, split(&read).1);
            if !view.grants.is_empty() {
                list.locks.push(view);
            }
        }
        Ok(list)
    }
}
