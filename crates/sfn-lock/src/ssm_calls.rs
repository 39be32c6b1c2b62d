//! The SSM store's calls: create or overwrite a parameter, find the newest
//! generation (probe ahead of the hint, or list), delete old generations.

use aws_sdk_ssm::error::ProvideErrorMetadata;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use tracing::warn;

use crate::error::{classify, StoreError};
use crate::model::LockName;
use crate::ssm::{SsmDocuments, MAX_VALUE_BYTES};
use crate::ssm_generations::Envelope;

/// `GetParameters` takes at most ten names: a probe looks ten generations ahead.
const PROBE: u64 = 10;
/// Room a grant must leave in a parameter's 4 KB, so that the releases and
/// renewals after it (a release record, a checkpoint) always fit.
const HEADROOM_BYTES: usize = 512;

/// The envelope as a parameter value. A grant that would leave less than
/// [`HEADROOM_BYTES`] is refused; any other change always fits, dropping the
/// oldest release records if it must.
pub(crate) fn fit(next: &mut Envelope, grant: bool) -> Result<String, StoreError> {
    loop {
        let value = serde_json::to_string(next)
            .map_err(|error| StoreError::Unavailable(format!("lock document: {error}")))?;
        if grant && value.len() > MAX_VALUE_BYTES - HEADROOM_BYTES {
            return Err(StoreError::Refused {
                field: "limit".into(),
                rule: format!(
                    "cannot be kept by the SSM store with these holders: the lock's state \
                     would be {} bytes, and a parameter holds {MAX_VALUE_BYTES} (less {HEADROOM_BYTES} \
                     kept for releases); use a lower limit, shorter owners, or another store",
                    value.len()
                ),
            });
        }
        if value.len() <= MAX_VALUE_BYTES || next.lock.releases.is_empty() {
            return Ok(value);
        }
        next.lock.releases.remove(0);
    }
}

pub(crate) fn envelope_of(name: Option<&str>, value: Option<&str>) -> Result<Envelope, StoreError> {
    value
        .and_then(|value| serde_json::from_str(value).ok())
        .ok_or_else(|| {
            StoreError::Misconfigured(format!(
                "parameter {name:?} is not a lock generation; is the path shared with something else?"
            ))
        })
}

impl SsmDocuments {
    /// Writes a parameter. A create (`overwrite` false) answers `false` when
    /// the name exists, or when SSM refused it as one of concurrent updates
    /// (`TooManyUpdates`): either way another writer's change came first.
    pub(crate) async fn put(
        &self,
        name: String,
        value: String,
        overwrite: bool,
    ) -> Result<bool, StoreError> {
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
            Err(error) if !overwrite && error.code() == Some("TooManyUpdates") => Ok(false),
            Err(error) => Err(classify("PutParameter", error)),
        }
    }

    /// The newest generation from `from` on, ten names per request; `None`
    /// if `from` itself does not exist (deleted, or never made).
    pub(crate) async fn probe(
        &self,
        lock_name: &LockName,
        from: u64,
    ) -> Result<Option<Envelope>, StoreError> {
        let mut newest: Option<Envelope> = None;
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
            for parameter in page.parameters() {
                let envelope = envelope_of(parameter.name(), parameter.value())?;
                if newest
                    .as_ref()
                    .is_none_or(|n| n.generation < envelope.generation)
                {
                    newest = Some(envelope);
                }
            }
            let found = newest.as_ref().map_or(0, |n| n.generation);
            if found < from {
                return Ok(None);
            }
            // Generations are consecutive: a full window may have more after it.
            if found + 1 < start + PROBE {
                return Ok(newest);
            }
            start += PROBE;
        }
    }

    /// The newest of the lock's generations, by listing them all: for a lock
    /// without a usable hint (new, or its hint deleted or far behind).
    pub(crate) async fn list_generations(
        &self,
        lock_name: &LockName,
    ) -> Result<Option<Envelope>, StoreError> {
        let current = self.current_name(lock_name);
        let mut newest: Option<Envelope> = None;
        for (name, value) in self.parameters_under(&self.lock_path(lock_name)).await? {
            if name == current {
                continue;
            }
            let envelope = envelope_of(Some(&name), Some(&value))?;
            if newest
                .as_ref()
                .is_none_or(|n| n.generation < envelope.generation)
            {
                newest = Some(envelope);
            }
        }
        Ok(newest)
    }

    /// Every parameter directly under `path`, as (name, value), page by page.
    pub(crate) async fn parameters_under(
        &self,
        path: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut found = Vec::new();
        let mut next_token = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(path)
                .recursive(false)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|error| classify("GetParametersByPath", error))?;
            for parameter in page.parameters() {
                if let (Some(name), Some(value)) = (parameter.name(), parameter.value()) {
                    found.push((name.to_string(), value.to_string()));
                }
            }
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Ok(found),
            }
        }
    }

    /// Deletes generations `range`; `false` if a call failed (logged), so
    /// that the caller keeps them on its list.
    pub(crate) async fn delete_generations(
        &self,
        lock_name: &LockName,
        range: std::ops::Range<u64>,
    ) -> bool {
        let names: Vec<String> = range.map(|g| self.generation_name(lock_name, g)).collect();
        for batch in names.chunks(10) {
            let deleted = self
                .client
                .delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await;
            if let Err(error) = deleted {
                warn!(lock_name = lock_name.as_str(), error = %classify("DeleteParameters", error),
                      "could not delete old generations; a later change tries again");
                return false;
            }
        }
        true
    }
}
