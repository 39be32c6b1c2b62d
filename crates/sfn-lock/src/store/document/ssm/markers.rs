//! The SSM store's owner markers: `/PATH/.owners/<owner hash>/<lock>/<token>`,
//! one per grant, named by the grant's fencing token.
//!
//! SSM documents that a name deleted must not be created again for 30
//! seconds. A marker is deleted at its grant's release, and the same owner
//! may take the same lock again at once: its new grant has a new token, so
//! its marker has a new name. A renewal writes its own grant's marker again
//! (an overwrite of a name that exists). Markers written before this layout
//! (`/PATH/.owners/<owner hash>/<lock>`, no token) are still found and deleted.

use std::collections::BTreeSet;

use aws_sdk_ssm::types::Parameter;
use tracing::info;

use crate::aws::errors::classify;
use crate::store::document::ssm::path::SsmDocuments;
use crate::store::names::{decode_name, encode_name};
use crate::vocab::error::StoreError;
use crate::vocab::model::{LockName, Owner};

/// Fencing tokens are numbered with this many digits in a marker's name.
pub(crate) const TOKEN_DIGITS: usize = 20;

impl SsmDocuments {
    /// The folder of the owner's markers for one lock (and, before the
    /// token was in the name, the marker itself).
    fn marker_folder(&self, owner: &Owner, lock_name: &LockName) -> String {
        format!(
            "{}/{}",
            self.owner_path(owner),
            encode_name(lock_name.as_str())
        )
    }

    pub(crate) fn marker_name(&self, owner: &Owner, lock_name: &LockName, token: u64) -> String {
        format!(
            "{}/{token:0width$}",
            self.marker_folder(owner, lock_name),
            width = TOKEN_DIGITS
        )
    }

    pub(crate) async fn put_marker(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        token: u64,
    ) -> Result<(), StoreError> {
        let name = self.marker_name(owner, lock_name, token);
        self.put(name, owner.as_str().to_string(), true).await?;
        Ok(())
    }

    /// The names of the owner's markers for the lock (one listing).
    async fn marker_names(
        &self,
        owner: &Owner,
        lock_name: &LockName,
    ) -> Result<Vec<String>, StoreError> {
        let folder = self.marker_folder(owner, lock_name);
        Ok(self
            .parameters_under(&folder)
            .await?
            .iter()
            .filter_map(|marker| marker.name().map(str::to_string))
            .collect())
    }

    /// Deletes the owner's markers for the lock; none is fine. The old
    /// layout's name goes in the same call, found or not.
    pub(crate) async fn delete_markers(
        &self,
        owner: &Owner,
        lock_name: &LockName,
    ) -> Result<(), StoreError> {
        let mut names = self.marker_names(owner, lock_name).await?;
        names.push(self.marker_folder(owner, lock_name));
        self.delete_names(&names).await
    }

    async fn delete_names(&self, names: &[String]) -> Result<(), StoreError> {
        for batch in names.chunks(10) {
            // DeleteParameters lists a missing name as invalid instead of failing.
            self.client
                .delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|error| classify("DeleteParameters", error))?;
        }
        Ok(())
    }

    /// Deletes the owner's markers for the lock whose grants are over:
    /// tokens up to `last_issued` that are not in `held`. The old layout's
    /// name (no token) is left to the sweep.
    pub(crate) async fn delete_ended_markers(
        &self,
        owner: &Owner,
        lock_name: &LockName,
        last_issued: u64,
        held: &[u64],
    ) -> Result<(), StoreError> {
        let ended: Vec<String> = (self.marker_names(owner, lock_name).await?)
            .into_iter()
            .filter(|name| {
                let token = name.rsplit('/').next().and_then(|t| t.parse::<u64>().ok());
                token.is_some_and(|token| token <= last_issued && !held.contains(&token))
            })
            .collect();
        if ended.is_empty() {
            return Ok(());
        }
        self.delete_names(&ended).await?;
        info!(
            lock_name = lock_name.as_str(),
            owner = owner.as_str(),
            markers = ended.len(),
            "deleted the owner's markers of grants that are over"
        );
        Ok(())
    }

    /// The locks the owner has markers for: `<lock>/<token>` or (old) `<lock>`.
    pub(crate) async fn marked_locks(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        let folder = self.owner_path(owner);
        let markers = self.parameters_under_recursive(&folder).await?;
        let locks: BTreeSet<LockName> = markers
            .iter()
            .filter_map(|marker| {
                let rest = marker.name()?.strip_prefix(&folder)?.strip_prefix('/')?;
                let encoded = rest.split('/').next()?;
                LockName::new(decode_name(encoded)?).ok()
            })
            .collect();
        Ok(locks.into_iter().collect())
    }

    /// Every parameter under `path`, at any depth, page by page.
    async fn parameters_under_recursive(&self, path: &str) -> Result<Vec<Parameter>, StoreError> {
        let mut found = Vec::new();
        let mut next_token = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(path)
                .recursive(true)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|error| classify("GetParametersByPath", error))?;
            found.extend(page.parameters().iter().cloned());
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Ok(found),
            }
        }
    }
}
