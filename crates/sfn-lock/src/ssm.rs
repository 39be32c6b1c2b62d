//! The lock on SSM Parameter Store (`LOCK_STORE_URL=ssm:///PATH`). SSM can
//! create a parameter only if absent (`Overwrite=false`) but has no
//! compare-and-swap, so a lock is a sequence of generations,
//! `/PATH/<encoded name>/<generation>`, each holding the whole lock document:
//! a change creates generation N+1 after reading generation N, and of all
//! writers that read N only one can create N+1; that create is the arbiter.
//! `/PATH/<encoded name>/current` repeats the newest generation, overwritten
//! after each create: a read starts there and probes the ten names after it
//! (one `GetParameters`), so a hint that lags (its writer between create and
//! hint, or dead there) misleads nobody. Old generations are deleted behind
//! (`ssm_generations.rs`; DESIGN.md, "SSM store").

use aws_sdk_ssm::error::ProvideErrorMetadata;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use aws_sdk_ssm::Client;
use tracing::warn;

use crate::document::LockDoc;
use crate::document_store::{DocumentStore, Documents};
use crate::error::{classify, StoreError};
use crate::model::{EpochMillis, LockName, Owner};
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
/// `GetParameters` takes at most ten names: a probe looks ten generations ahead.
const PROBE: u64 = 10;

/// The lock on SSM.
pub type SsmStore = DocumentStore<SsmDocuments>;

#[derive(Clone, Debug)]
pub struct SsmDocuments {
    client: Client,
    /// Begins with `/`, never ends with one.
    path: String,
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
    fn lock_path(&self, lock_name: &LockName) -> String {
        format!("{}/{}", self.path, encode_name(lock_name.as_str()))
    }

    fn generation_name(&self, lock_name: &LockName, generation: u64) -> String {
        format!(
            "{}/{generation:0width$}",
            self.lock_path(lock_name),
            width = GENERATION_DIGITS
        )
    }

    fn current_name(&self, lock_name: &LockName) -> String {
        format!("{}/current", self.lock_path(lock_name))
    }

    fn owner_path(&self, owner: &Owner) -> String {
        format!("{}/.owners/{}", self.path, owner_hash(owner.as_str()))
    }

    fn marker_name(&self, owner: &Owner, lock_name: &LockName) -> String {
        format!(
            "{}/{}",
            self.owner_path(owner),
            encode_name(lock_name.as_str())
        )
    }

    async fn put(&self, name: String, value: String, overwrite: bool) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::String)
            .tier(ParameterTier::Standard)
            .overwrite(overwrite)
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(error) if error.code() == Some("ParameterAlreadyExists") => Ok(false),
            Err(error) => Err(classify("PutParameter", error)),
        }
    }

    /// The newest generation at or after `from`, ten names per request.
    async fn probe(&self, lock_name: &LockName, from: u64) -> Result<Option<Envelope>, StoreError> {
        let mut newest = None;
        let mut start = from;
        loop {
            let names = (start..start + PROBE).map(|g| self.generation_name(lock_name, g));
            let page = self
                .client
                .get_parameters()
                .set_names(Some(names.collect()))
                .send()
                .await
                .map_err(|error| classify("GetParameters", error))?;
            let mut found = 0;
            for parameter in page.parameters() {
                let envelope = envelope_of(parameter.name(), parameter.value())?;
                found = found.max(envelope.generation);
                if newest
                    .as_ref()
                    .is_none_or(|n: &Envelope| n.generation < envelope.generation)
                {
                    newest = Some(envelope);
                }
            }
            // Generations are consecutive: a full window may have more after it.
            if found + 1 < start + PROBE {
                return Ok(newest);
            }
            start += PROBE;
        }
    }

    /// Deletes generations `range`; a failure leaves them to the quota, logged.
    async fn delete_generations(&self, lock_name: &LockName, range: std::ops::Range<u64>) {
        let names: Vec<String> = range.map(|g| self.generation_name(lock_name, g)).collect();
        for batch in names.chunks(10) {
            let deleted = self
                .client
                .delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await;
            if let Err(error) = deleted {
                warn!(lock_name = lock_name.as_str(), names = ?batch, error = %classify("DeleteParameters", error),
                      "could not delete old generations; they stay until deleted by hand");
                return;
            }
        }
    }
}

fn envelope_of(name: Option<&str>, value: Option<&str>) -> Result<Envelope, StoreError> {
    value
        .and_then(|value| serde_json::from_str(value).ok())
        .ok_or_else(|| {
            StoreError::Misconfigured(format!(
                "parameter {name:?} is not a lock generation; is the path shared with something else?"
            ))
        })
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
        // that writer died in between: the generations after it decide.
        let after = hint.as_ref().map_or(1, |hint| hint.generation + 1);
        let newest = self.probe(lock_name, after).await?.or(hint);
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
        let (next, deletable) = next_envelope(read, doc.clone(), now.0);
        let value = serde_json::to_string(&next)
            .map_err(|error| StoreError::Unavailable(format!("lock document: {error}")))?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(StoreError::Refused {
                field: "limit".into(),
                rule: format!(
                    "cannot be kept by the SSM store with these holders: the lock's state \
                     would be {} bytes, and a parameter holds {MAX_VALUE_BYTES}; use a lower \
                     limit, shorter owners, or another store",
                    value.len()
                ),
            });
        }
        let name = self.generation_name(lock_name, next.generation);
        if !self.put(name, value.clone(), false).await? {
            return Ok(false);
        }
        self.delete_generations(lock_name, deletable).await;
        // The change is made; a lagging hint costs the next writer a probe.
        if let Err(error) = self.put(self.current_name(lock_name), value, true).await {
            warn!(lock_name = lock_name.as_str(), error = %error, "could not update the current-generation hint");
        }
        Ok(true)
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

    async fn marked(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        let folder = self.owner_path(owner);
        let mut names = Vec::new();
        let mut next_token = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(&folder)
                .recursive(false)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|error| classify("GetParametersByPath", error))?;
            let found = page.parameters().iter().filter_map(|parameter| {
                let encoded = parameter.name()?.strip_prefix(&folder)?.strip_prefix('/')?;
                LockName::new(decode_name(encoded)?).ok()
            });
            names.extend(found);
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Ok(names),
            }
        }
    }
}
