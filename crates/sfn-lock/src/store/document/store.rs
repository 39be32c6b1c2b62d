//! [`LockStore`] for stores that keep a lock as one document and can replace
//! it only if it is still the version read ([`Documents`]: S3, SSM). Each
//! call reads the document, decides (`document.rs`), and writes it back
//! conditionally; a write that lost to another decides afresh from a new read.

use std::future::Future;

use tracing::debug;

use crate::ports::store::LockStore;
use crate::store::document::doc::{
    decide_acquire, decide_release, AcquireStep, LockDoc, ReleaseStep,
};
use crate::store::ids::release_id;
use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::vocab::request::{LeaseSeconds, Limit};
use crate::vocab::view::{Grant, LockList, LockView};

/// Rounds one call may lose to other writers before it answers
/// `LockStoreUnavailable` (a caller within its wait bound tries again). A lost
/// round means another writer's decision landed: usually the next read answers.
pub const MAX_ROUNDS: usize = 8;

/// One lock document per name, replaced only conditionally.
pub trait Documents: Send + Sync {
    /// What a conditional write compares: S3's ETag, SSM's generation.
    type Version: Send + Sync;

    /// Refuses a name this store cannot hold (too long once encoded), with
    /// the rule; nothing is read or written.
    fn check_name(&self, lock_name: &LockName) -> Result<(), StoreError>;

    /// Refuses a name this store cannot grant (a grant may need longer
    /// names than a release or a read); by default as [`Documents::check_name`].
    fn check_grant_name(&self, lock_name: &LockName) -> Result<(), StoreError> {
        self.check_name(lock_name)
    }

    /// The lock's newest document and its version; `None` if it has none.
    /// An answer given without a write (contention, `not_held`) rests on
    /// this read alone, so it must be the newest version the store knows of
    /// when it was made; a write's condition is the arbiter of every change.
    fn read(
        &self,
        lock_name: &LockName,
    ) -> impl Future<Output = Result<Option<(Self::Version, LockDoc)>, StoreError>> + Send;

    /// Writes `doc` if the lock's document is still version `read` (`None`:
    /// still absent). `Ok(false)`: another write came first, nothing written.
    fn write(
        &self,
        lock_name: &LockName,
        read: Option<&Self::Version>,
        doc: &LockDoc,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Makes an answer given without a write (a release's `not_held` or
    /// `held_by_other`) as sure as one: `Ok(false)` if `read` was not the
    /// newest version after all; decide again. A store whose reads are
    /// strongly consistent answers `true` without a request.
    fn confirm(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        read: Option<&Self::Version>,
        doc: Option<&LockDoc>,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Records that `owner` may hold the lock, before the grant with
    /// `fencing_token` is written, so that the sweep finds it
    /// ([`Documents::marked`]). Idempotent.
    fn mark(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        fencing_token: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes the record of [`Documents::mark`]; absent is fine.
    fn unmark(
        &self,
        owner: &Owner,
        lock_name: &LockName,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// After a release that did not remove every marker of the owner's for
    /// the lock: removes those that name grants `doc` (the newest document,
    /// read or confirmed by the release) shows are over, issued (a token up
    /// to its last) and not held by the owner. A marker an acquire of the
    /// owner's wrote for a grant still to come names a later token and
    /// stays; one at or below the last token issued belongs to a grant that
    /// can no longer land (its create finds the next generation taken, or
    /// lands outside the write window and is not answered for). A store
    /// whose markers carry no token cannot tell the two apart and removes
    /// nothing (the default; DESIGN.md, "Owner markers").
    fn unmark_ended(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        doc: Option<&LockDoc>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (owner, lock_name, doc);
        std::future::ready(Ok(()))
    }

    /// Up to `max` names of locks that have a document, and whether there
    /// may be more (operators' listing; markers are not locks).
    fn names(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<(Vec<LockName>, bool), StoreError>> + Send;

    /// Waits, if this store must, before each read of the operators'
    /// listing: on SSM it shares the locks' own throughput (`ports/listing_pace.rs`).
    fn before_listing_read(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// Reclaims the storage of up to `max` locks nobody uses any more; a
    /// store whose locks cost nothing idle does nothing (the default).
    fn reclaim_idle(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<crate::ports::store::Reclaimed, StoreError>> + Send {
        let _ = max;
        std::future::ready(Ok(crate::ports::store::Reclaimed::default()))
    }

    /// The locks marked for `owner`.
    fn marked(
        &self,
        owner: &Owner,
    ) -> impl Future<Output = Result<Vec<LockName>, StoreError>> + Send;
}

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
