//! [`Documents`] on Parameter Store: what the shared document logic
//! (`store::document::store`) asks of SSM.

use crate::aws::errors::classify;

use crate::ports::listing_pace;
use crate::store::document::doc::LockDoc;
use crate::store::document::documents::Documents;
use crate::store::document::ssm::markers::TOKEN_DIGITS;
use crate::store::document::ssm::path::SsmDocuments;
use crate::store::document::ssm::window::SsmRead;
use crate::store::names::decode_name;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner};

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
    /// over. Paced with the reads after it (`ports/listing_pace.rs`): a listing
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

    async fn reclaim_idle(&self, max: usize) -> Result<crate::ports::store::Reclaimed, StoreError> {
        SsmDocuments::reclaim_idle(self, max).await
    }

    async fn marked(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        self.marked_locks(owner).await
    }
}
