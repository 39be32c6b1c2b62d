//! The SSM store's calls: create or overwrite a parameter, find the newest
//! generation (probe ahead of the hint, or list), delete old generations.
//! Each generation found comes with its `LastModifiedDate` and each create
//! with its answer's `Date`: the service's clock (`aws/service_clock.rs`).

use aws_sdk_ssm::error::ProvideErrorMetadata;
use aws_sdk_ssm::types::{Parameter, ParameterTier, ParameterType};
use tracing::warn;

use crate::aws::errors::classify;
use crate::aws::service_clock::ServiceDate;
use crate::store::document::ssm::generations::Envelope;
use crate::store::document::ssm::path::{SsmDocuments, MAX_VALUE_BYTES};
use crate::vocab::error::StoreError;
use crate::vocab::model::LockName;

/// A generation as found, with its `LastModifiedDate` (milliseconds).
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub envelope: Envelope,
    pub modified_at: i64,
}

/// What a create did: `None` if another writer's came first, else the
/// `Date` of its answer (`Some(None)`: the answer had none).
pub(crate) type Created = Option<Option<i64>>;

/// `GetParameters` takes at most ten names: a probe looks ten generations ahead.
const PROBE: u64 = 10;
/// Room a grant must leave in a parameter's 4 KB, so that the releases and
/// renewals after it (a release record, a checkpoint) always fit.
const HEADROOM_BYTES: usize = 512;

/// The envelope as a parameter value. A grant that would leave less than
/// [`HEADROOM_BYTES`] is refused; any other change always fits, dropping the
/// oldest release records if it must. The grant's check leaves the release
/// records out (they give way to anything), so how many holders fit never
/// depends on the lock's history.
pub(crate) fn fit(next: &mut Envelope, grant: bool) -> Result<String, StoreError> {
    let to_string = |envelope: &Envelope| {
        serde_json::to_string(envelope)
            .map_err(|error| StoreError::Unavailable(format!("lock document: {error}")))
    };
    if grant {
        let mut bare = next.clone();
        bare.lock.releases.clear();
        let needed = to_string(&bare)?.len();
        if needed > MAX_VALUE_BYTES - HEADROOM_BYTES {
            return Err(StoreError::Refused {
                field: "limit".into(),
                rule: format!(
                    "cannot be kept by the SSM store with these holders: the lock's state \
                     would be {} bytes, and a parameter holds {MAX_VALUE_BYTES} (less {HEADROOM_BYTES} \
                     kept for releases); use a lower limit, shorter owners, or another store",
                    needed
                ),
            });
        }
    }
    loop {
        let value = to_string(next)?;
        if value.len() <= MAX_VALUE_BYTES || next.lock.releases.is_empty() {
            return Ok(value);
        }
        next.lock.releases.remove(0);
    }
}

/// A generation parameter as found; its `LastModifiedDate` is required.
pub(crate) fn found(parameter: &Parameter) -> Result<Found, StoreError> {
    let envelope = envelope_of(parameter.name(), parameter.value())?;
    let modified_at = parameter
        .last_modified_date()
        .and_then(|date| date.to_millis().ok())
        .ok_or_else(|| {
            StoreError::Unavailable(format!(
                "SSM answered parameter {:?} without its LastModifiedDate",
                parameter.name()
            ))
        })?;
    Ok(Found {
        envelope,
        modified_at,
    })
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
    /// Writes a parameter. A create (`overwrite` false) answers `None` when
    /// the name exists, or when SSM refused it as one of concurrent updates
    /// (`TooManyUpdates`): either way another writer's change came first.
    pub(crate) async fn put(
        &self,
        name: String,
        value: String,
        overwrite: bool,
    ) -> Result<Created, StoreError> {
        let date = ServiceDate::default();
        let put = self
            .client
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::String)
            .tier(ParameterTier::Standard)
            .overwrite(overwrite)
            .customize()
            .interceptor(date.clone())
            .send()
            .await;
        match put {
            Ok(_) => Ok(Some(date.millis())),
            Err(error) if error.code() == Some("ParameterAlreadyExists") => Ok(None),
            Err(error) if !overwrite && error.code() == Some("TooManyUpdates") => Ok(None),
            Err(error) => Err(classify("PutParameter", error)),
        }
    }

    /// The newest generation from `from` on, ten names per request; `None`
    /// if `from` itself does not exist (deleted, or never made).
    pub(crate) async fn probe(
        &self,
        lock_name: &LockName,
        from: u64,
    ) -> Result<Option<Found>, StoreError> {
        let mut newest: Option<Found> = None;
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
                let candidate = found(parameter)?;
                if newest
                    .as_ref()
                    .is_none_or(|n| n.envelope.generation < candidate.envelope.generation)
                {
                    newest = Some(candidate);
                }
            }
            let found = newest.as_ref().map_or(0, |n| n.envelope.generation);
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
    ) -> Result<Option<Found>, StoreError> {
        let current = self.current_name(lock_name);
        let mut newest: Option<Found> = None;
        for parameter in self.parameters_under(&self.lock_path(lock_name)).await? {
            if parameter.name() == Some(current.as_str()) {
                continue;
            }
            let candidate = found(&parameter)?;
            if newest
                .as_ref()
                .is_none_or(|n| n.envelope.generation < candidate.envelope.generation)
            {
                newest = Some(candidate);
            }
        }
        Ok(newest)
    }

    /// Every parameter directly under `path`, page by page.
    pub(crate) async fn parameters_under(&self, path: &str) -> Result<Vec<Parameter>, StoreError> {
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
            found.extend(page.parameters().iter().cloned());
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
