//! The events `acquire-lock` and `release-lock` accept, checked field by field.
//!
//! Events are read from raw JSON rather than derived with serde so that every
//! rule break becomes an `InvalidLockRequest` naming the field, and unknown
//! fields (a typo such as `lease_seconds`) are refused instead of ignored.

use serde_json::{Map, Value};

use crate::vocab::error::LockError;
pub use crate::vocab::limits::{LeaseSeconds, Limit, WaitBound, MAX_LEASE_SECONDS, MAX_LIMIT};
use crate::vocab::model::{LockName, Owner};
use crate::vocab::task_token::TaskToken;
use crate::vocab::time::EpochMillis;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireRequest {
    pub lock_name: LockName,
    pub owner: Owner,
    /// `None` means the function's configured default.
    pub lease_seconds: Option<LeaseSeconds>,
    pub wait: Option<WaitBound>,
    /// Holders admitted at once; 1 (a mutex) when the event names none.
    pub limit: Limit,
    /// A `.waitForTaskToken` task's token: wait in the lock's queue instead
    /// of failing with `LockUnavailable`, and be woken with the grant.
    pub task_token: Option<TaskToken>,
}

/// A caller that waits in the lock's queue: the token its task sleeps on
/// and, when it has one, its wait bound (which bounds how long the store
/// keeps what the queue needs of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub token: TaskToken,
    pub wait: Option<WaitBound>,
}

impl From<TaskToken> for Waiting {
    fn from(token: TaskToken) -> Self {
        Waiting { token, wait: None }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseRequest {
    pub lock_name: LockName,
    pub owner: Owner,
    /// The token of the grant being released, when the event carries
    /// `acquire-lock`'s output: it makes the answer to a retried release exact.
    pub fencing_token: Option<u64>,
    /// The `limit` the lock was acquired with (acquire's output carries it):
    /// it tells the store which kind of grant to free first. Default 1.
    pub limit: Limit,
    /// `withdraw: true`: the caller is a waiter that gives up (the queued
    /// workflow's wait ran out). It leaves the queue and frees a grant a
    /// hand-off may have just made it; a lock held by someone else is then
    /// no sign of a lost lease, and the answer is `withdrawn`, not
    /// `held_by_other`.
    pub withdraw: bool,
}

const ACQUIRE_FIELDS: &[&str] = &[
    "lockName",
    "owner",
    "leaseSeconds",
    "waitStartedAt",
    "maxWaitSeconds",
    "limit",
    "taskToken",
];

/// `release-lock` also takes the whole output of `acquire-lock`, so an ASL can
/// pass `$.lock` straight through. `fencingToken` names the grant being
/// released; the other extra fields are accepted and unused.
const RELEASE_FIELDS: &[&str] = &[
    "lockName",
    "owner",
    "fencingToken",
    "acquiredAt",
    "expiresAt",
    "leaseSeconds",
    "outcome",
    "limit",
    "withdraw",
];

impl AcquireRequest {
    pub fn from_event(event: &Value) -> Result<Self, LockError> {
        let fields = object_with_known_fields(event, ACQUIRE_FIELDS)?;
        let lease_seconds = optional_integer(fields, "leaseSeconds")?
            .map(|seconds| LeaseSeconds::new("leaseSeconds", seconds))
            .transpose()?;
        let wait = match (
            optional_string(fields, "waitStartedAt")?,
            optional_integer(fields, "maxWaitSeconds")?,
        ) {
            (None, None) => None,
            (Some(started_at), Some(max_wait_seconds)) => Some(WaitBound {
                started_at: EpochMillis::parse_rfc3339(started_at).ok_or_else(|| {
                    LockError::invalid(
                        "waitStartedAt",
                        "must be an RFC 3339 date-time with a UTC offset, \
                         e.g. 2026-11-30T10:00:00Z or 2026-11-30T12:00:00+02:00",
                    )
                })?,
                max_wait_seconds: u32::try_from(max_wait_seconds)
                    .ok()
                    .filter(|seconds| *seconds <= MAX_LEASE_SECONDS)
                    .ok_or_else(|| {
                        LockError::invalid(
                            "maxWaitSeconds",
                            format!("must be an integer from 0 to {MAX_LEASE_SECONDS}"),
                        )
                    })?,
            }),
            (Some(_), None) => {
                return Err(LockError::invalid(
                    "maxWaitSeconds",
                    "is required when waitStartedAt is given",
                ))
            }
            (None, Some(_)) => {
                return Err(LockError::invalid(
                    "waitStartedAt",
                    "is required when maxWaitSeconds is given",
                ))
            }
        };
        Ok(AcquireRequest {
            lock_name: LockName::new(required_string(fields, "lockName")?)?,
            owner: Owner::new(required_string(fields, "owner")?)?,
            lease_seconds,
            wait,
            limit: optional_limit(fields)?,
            task_token: optional_string(fields, "taskToken")?
                .map(TaskToken::new)
                .transpose()?,
        })
    }
}

impl ReleaseRequest {
    pub fn from_event(event: &Value) -> Result<Self, LockError> {
        let fields = object_with_known_fields(event, RELEASE_FIELDS)?;
        let fencing_token = optional_integer(fields, "fencingToken")?
            .map(|token| {
                u64::try_from(token).map_err(|_| {
                    LockError::invalid("fencingToken", "must be a non-negative integer")
                })
            })
            .transpose()?;
        Ok(ReleaseRequest {
            lock_name: LockName::new(required_string(fields, "lockName")?)?,
            owner: Owner::new(required_string(fields, "owner")?)?,
            fencing_token,
            limit: optional_limit(fields)?,
            withdraw: optional_bool(fields, "withdraw")?.unwrap_or(false),
        })
    }
}

fn optional_limit(fields: &Map<String, Value>) -> Result<Limit, LockError> {
    optional_integer(fields, "limit")?.map_or(Ok(Limit::ONE), |limit| Limit::new("limit", limit))
}

fn object_with_known_fields<'a>(
    event: &'a Value,
    known: &[&str],
) -> Result<&'a Map<String, Value>, LockError> {
    let fields = event
        .as_object()
        .ok_or_else(|| LockError::invalid("event", "must be a JSON object"))?;
    if let Some(unknown) = fields.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(LockError::invalid(
            &truncated(unknown),
            format!("is not a known field (known: {})", known.join(", ")),
        ));
    }
    Ok(fields)
}

/// Field names come from the caller; keep an absurdly long one out of the message.
fn truncated(name: &str) -> String {
    match name.char_indices().nth(64) {
        Some((cut, _)) => format!("{}...", &name[..cut]),
        None => name.to_owned(),
    }
}

fn required_string<'a>(fields: &'a Map<String, Value>, field: &str) -> Result<&'a str, LockError> {
    optional_string(fields, field)?.ok_or_else(|| LockError::invalid(field, "is required"))
}

fn optional_string<'a>(
    fields: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, LockError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(LockError::invalid(field, "must be a string")),
    }
}

fn optional_bool(fields: &Map<String, Value>, field: &str) -> Result<Option<bool>, LockError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(LockError::invalid(field, "must be true or false")),
    }
}

fn optional_integer(fields: &Map<String, Value>, field: &str) -> Result<Option<i64>, LockError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_i64()
            .map(Some)
            .ok_or_else(|| LockError::invalid(field, "must be a whole number within 64-bit range")),
        Some(_) => Err(LockError::invalid(field, "must be an integer")),
    }
}

#[cfg(test)]
mod tests;
