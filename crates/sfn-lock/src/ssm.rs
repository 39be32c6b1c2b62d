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

use aws_sdk_ssm::error::ProvideErrorMetadata;
use aws_sdk_ssm::Client;
use tracing::warn;

use crate::document::LockDoc;
use crate::document_store::{DocumentStore, Documents};
use crate::error::{classify, StoreError};
use crate::model::{EpochMillis, LockName, Owner};
use crate::ssm_calls::{envelope_of, fit};
use crate::ssm_generations::{next_envelope, Envelope};
use crate::store_names::{decode_name, encode_name, owner_hash, OWNER_HASH_DIGITS};

pub use crate::ssm_generations::KEEP_SUPERSEDED_MILLIS;

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

    pub(crate) fn marker_name(&self, owner: &Owner, lock_name: &LockName) -> String {
        format!(
            "{}/{}",
            self.owner_path(owner),
            encode_name(lock_name.as_str())
        )
    }
}

impl Documents for SsmDocuments {
    type Version = Envelope;

    fn check_name(&self, lock_name: &LockName) -> Result<(), StoreError> {
        // The marker's name is the longest and deepest of a lock's names.
        let chars = self.path.len()
            + "/.owners/".len()
            + OWNER_HASH_DIGITS
            + 1
            + encode_name(lock_name.as_str()).len();
        let levels = self.path.matches('/').count() + 3;
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

    async fn read(&self, lock_name: &LockName) -> Result<Option<(Envelope, LockDoc)>, StoreError> {
        let got = self
            .client
            .get_parameter()
            .name(self.current_name(lock_name))
            .send()
            .await;
        let hint = match got {
            Ok(output) => {
                let parameter = output.parameter();
                Some(envelope_of(
                    parameter.and_then(|p| p.name()),
                    parameter.and_then(|p| p.value()),
                )?)
            }
            Err(error) if error.code() == Some("ParameterNotFound") => None,
            Err(error) => return Err(classify("GetParameter", error)),
        };
        // The hint lags while its writer is between create and hint, or if
        // that writer died in between: the generations from it on decide. A
        // hint whose own generation is gone (below the oldest kept), or none,
        // proves nothing: then the lock's generations are listed.
        let probed = match &hint {
            Some(hint) => self.probe(lock_name, hint.generation).await?,
            None => None,
        };
        let newest = match probed {
            Some(newest) => Some(newest),
            None => self.list_generations(lock_name).await?,
        };
        Ok(newest.map(|envelope| {
            let lock = envelope.lock.clone();
            (envelope, lock)
        }))
    }

    async fn write(
        &self,
        lock_name: &LockName,
        read: Option<&Envelope>,
        doc: &LockDoc,
        now: EpochMillis,
    ) -> Result<bool, StoreError> {
        let (mut next, deletable) = next_envelope(read, doc.clone(), now.0, true);
        // Deleted before the create: they may go whoever wins it, and a create
        // that lands unseen (its answer lost) leaves none behind undeleted.
        if !deletable.is_empty() && !self.delete_generations(lock_name, deletable).await {
            next = next_envelope(read, doc.clone(), now.0, false).0;
        }
        // A grant brings a holder the read did not have (the count may stay,
        // when it replaces an expired one).
        let before = read
            .map(|read| read.lock.holders.as_slice())
            .unwrap_or_default();
        let grant = doc.holders.iter().any(|holder| {
            !before
                .iter()
                .any(|b| b.owner == holder.owner && b.fencing_token == holder.fencing_token)
        });
        let value = fit(&mut next, grant)?;
        let name = self.generation_name(lock_name, next.generation);
        if !self.put(name, value.clone(), false).await? {
            return Ok(false);
        }
        // The change is made; a lagging hint costs the next reader a probe.
        if let Err(error) = self.put(self.current_name(lock_name), value, true).await {
            warn!(lock_name = lock_name.as_str(), error = %error, "could not update the current-generation hint");
        }
        Ok(true)
    }

    async fn confirm(
        &self,
        lock_name: &LockName,
        read: Option<&Envelope>,
        doc: Option<&LockDoc>,
        now: EpochMillis,
    ) -> Result<bool, StoreError> {
        // SSM's reads may be stale: the same document, created as the next
        // generation, proves the read was the newest when it landed.
        let doc = doc.cloned().unwrap_or(LockDoc {
            format: 1,
            updated_at: now.0,
            ..LockDoc::default()
        });
        self.write(lock_name, read, &doc, now).await
    }

    async fn mark(&self, owner: &Owner, lock_name: &LockName) -> Result<(), StoreError> {
        let name = self.marker_name(owner, lock_name);
        self.put(name, owner.as_str().to_string(), true).await?;
        Ok(())
    }

    async fn unmark(&self, owner: &Owner, lock_name: &LockName) -> Result<(), StoreError> {
        // DeleteParameters lists a missing name as invalid instead of failing.
        self.client
            .delete_parameters()
            .names(self.marker_name(owner, lock_name))
            .send()
            .await
            .map_err(|error| classify("DeleteParameters", error))?;
        Ok(())
    }

    /// `GetParametersByPath` under the path, recursive: every lock's
    /// generations and hint (10 a page), one name per lock folder; the
    /// `.owners` folder and names that are not encoded lock names are passed over.
    async fn names(&self, max: usize) -> Result<(Vec<LockName>, bool), StoreError> {
        let mut names = std::collections::BTreeSet::new();
        let mut next_token = None;
        loop {
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

    async fn marked(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        let folder = self.owner_path(owner);
        let markers = self.parameters_under(&folder).await?;
        Ok(markers
            .iter()
            .filter_map(|(name, _)| {
                let encoded = name.strip_prefix(&folder)?.strip_prefix('/')?;
                LockName::new(decode_name(encoded)?).ok()
            })
            .collect())
    }
}
