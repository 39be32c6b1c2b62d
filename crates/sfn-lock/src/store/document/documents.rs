//! What a document store asks of its service ([`Documents`]): read a lock's
//! document with its version, write it only if that version is still the
//! stored one, and keep the owner markers. S3 (`s3.rs`) and SSM (`ssm/`)
//! implement it; `store.rs` builds the lock on top.

use std::future::Future;

use crate::store::document::doc::LockDoc;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner};

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
