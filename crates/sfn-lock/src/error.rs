//! The four (five, with the wait bound) outcomes a state machine can tell apart.
//!
//! Each variant maps to one stable `errorType` string that ASL `Retry` and `Catch`
//! match on. These names are a public API: never rename them.

use std::error::Error as _;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{
    ConnectorError, DisplayErrorContext, ProvideErrorMetadata, SdkError,
};
use lambda_runtime::Diagnostic;
use serde_json::json;

/// Why an acquire or release did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Live owners fill the caller's limit (one, for a mutex). Retry after a
    /// wait. `holder` and `expires_at` name the lease that ends first.
    #[error("{}", held(.lock_name, .holder, .expires_at, *.limit, .live_holders))]
    Unavailable {
        lock_name: String,
        holder: String,
        expires_at: String,
        limit: u32,
        /// Every live holder as `(owner, expiresAt)`, the first to end first.
        live_holders: Vec<(String, String)>,
    },
    /// The lock was still held when the caller's wait bound ran out.
    #[error("gave up waiting for lock {lock_name:?} after {max_wait_seconds} s; {}",
            held(.lock_name, .holder, .expires_at, *.limit, .live_holders))]
    WaitTimeout {
        lock_name: String,
        holder: String,
        expires_at: String,
        limit: u32,
        live_holders: Vec<(String, String)>,
        max_wait_seconds: u32,
    },
    /// The store did not answer while the caller may still wait. Step Functions
    /// counts a retrier's attempts across the whole wait, so a bounded
    /// store-error retrier would end a long wait after a few scattered
    /// hiccups: inside the bound this is one more reason to wait, under the
    /// wait's own name. (The write may have landed: the retry renews it.)
    #[error("lock {lock_name:?}: the lock store did not answer, waiting on: {detail}")]
    StoreUnavailableWhileWaiting { lock_name: String, detail: String },
    /// The event or the function's configuration breaks a rule. Nothing was written.
    #[error("{field} {rule}")]
    InvalidRequest { field: String, rule: String },
    /// The store could not be reached or asked us to slow down. Worth retrying.
    #[error("the lock store is unavailable: {detail}")]
    StoreUnavailable { detail: String },
    /// The store rejected the request for a reason a retry will not fix
    /// (missing table, access denied, a malformed item).
    #[error("the lock store is misconfigured: {detail}")]
    StoreMisconfigured { detail: String },
}

impl LockError {
    pub(crate) fn invalid(field: &str, rule: impl Into<String>) -> Self {
        LockError::InvalidRequest {
            field: field.to_owned(),
            rule: rule.into(),
        }
    }

    /// The `errorType` Step Functions matches in `Retry` and `Catch`.
    pub fn error_type(&self) -> &'static str {
        match self {
            LockError::Unavailable { .. } | LockError::StoreUnavailableWhileWaiting { .. } => {
                "LockUnavailable"
            }
            LockError::WaitTimeout { .. } => "LockWaitTimeout",
            LockError::InvalidRequest { .. } => "InvalidLockRequest",
            LockError::StoreUnavailable { .. } => "LockStoreUnavailable",
            LockError::StoreMisconfigured { .. } => "LockStoreMisconfigured",
        }
    }

    /// The `errorMessage`: a JSON object, so that an ASL can read its fields.
    /// Step Functions' `Cause` for a Lambda error is `{"errorType", "errorMessage"}`
    /// as a string: `States.StringToJson` on the Cause, then again on its
    /// `errorMessage`.
    pub fn error_message(&self) -> String {
        let message = self.to_string();
        let body = match self {
            LockError::Unavailable {
                lock_name,
                holder,
                expires_at,
                limit,
                live_holders,
            } => json!({
                "lockName": lock_name, "holder": holder, "expiresAt": expires_at,
                "limit": limit, "liveHolders": live_holders.len(),
                "holders": holders_json(live_holders), "message": message,
            }),
            LockError::StoreUnavailableWhileWaiting { lock_name, .. } => json!({
                "lockName": lock_name, "holder": null, "expiresAt": null,
                "storeUnavailable": true, "message": message,
            }),
            LockError::WaitTimeout {
                lock_name,
                holder,
                expires_at,
                limit,
                live_holders,
                max_wait_seconds,
            } => json!({
                "lockName": lock_name, "holder": holder, "expiresAt": expires_at,
                "limit": limit, "liveHolders": live_holders.len(),
                "holders": holders_json(live_holders),
                "maxWaitSeconds": max_wait_seconds, "message": message,
            }),
            LockError::InvalidRequest { field, rule } => {
                json!({ "field": field, "rule": rule, "message": message })
            }
            LockError::StoreUnavailable { .. } | LockError::StoreMisconfigured { .. } => {
                json!({ "message": message })
            }
        };
        body.to_string()
    }
}

/// Holders listed in an error message: enough to see who to wait for, while a
/// limit of 1000 keeps the message small.
pub const LISTED_HOLDERS: usize = 10;

/// Why a lock is not available, in words: the mutex's sentence as it always
/// was, and for a semaphore its limit, its live holders and the first end.
fn held(
    lock_name: &str,
    holder: &str,
    expires_at: &str,
    limit: u32,
    live_holders: &[(String, String)],
) -> String {
    if limit <= 1 {
        return format!("lock {lock_name:?} is held by {holder:?} until {expires_at}");
    }
    let listed: Vec<String> = live_holders
        .iter()
        .take(LISTED_HOLDERS)
        .map(|(owner, until)| format!("{owner:?} until {until}"))
        .collect();
    let more = live_holders.len().saturating_sub(LISTED_HOLDERS);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "lock {lock_name:?} admits no more holders: {} live of limit {limit} ({}{more}); \
         the first lease ends at {expires_at}",
        live_holders.len(),
        listed.join(", "),
    )
}

fn holders_json(live_holders: &[(String, String)]) -> serde_json::Value {
    live_holders
        .iter()
        .take(LISTED_HOLDERS)
        .map(|(owner, expires_at)| json!({ "owner": owner, "expiresAt": expires_at }))
        .collect()
}

impl From<LockError> for Diagnostic {
    fn from(error: LockError) -> Self {
        Diagnostic {
            error_type: error.error_type().to_owned(),
            error_message: error.error_message(),
        }
    }
}

/// A store call that failed for a reason other than the lock's own state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Misconfigured(String),
    /// The request breaks a rule of this store (a size it cannot hold).
    /// Nothing was written.
    #[error("{field} {rule}")]
    Refused { field: String, rule: String },
}

impl From<StoreError> for LockError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(detail) => LockError::StoreUnavailable { detail },
            StoreError::Misconfigured(detail) => LockError::StoreMisconfigured { detail },
            StoreError::Refused { field, rule } => LockError::InvalidRequest { field, rule },
        }
    }
}

/// Folds the SDK's many failure shapes into the two a caller acts on.
pub(crate) fn classify<E>(operation: &str, error: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = match &error {
        SdkError::ServiceError(failure) => format!(
            "{operation} failed with HTTP {}: {}: {}",
            failure.raw().status().as_u16(),
            failure.err().code().unwrap_or("no error code"),
            failure.err().message().unwrap_or("no message"),
        ),
        other => format!("{operation} failed: {}", DisplayErrorContext(other)),
    };
    let retryable = match &error {
        SdkError::DispatchFailure(failure) => match failure.as_connector_error() {
            Some(connector) => is_retryable_dispatch(connector),
            None => true,
        },
        SdkError::ServiceError(failure) => {
            failure.raw().status().is_server_error()
                || matches!(
                    failure.err().code(),
                    Some(
                        "ThrottlingException"
                            | "ProvisionedThroughputExceededException"
                            | "RequestLimitExceeded"
                            | "InternalServerError"
                            | "ServiceUnavailable"
                            | "TransactionConflictException"
                            | "ReplicatedWriteConflictException"
                            // S3's throttle, SSM's one-update-at-a-time conflict.
                            | "SlowDown"
                            | "TooManyUpdates"
                    )
                )
        }
        // The request could not even be built: a retry builds it the same way.
        SdkError::ConstructionFailure(_) => false,
        // Timeouts, unreadable responses, and whatever the SDK adds later: a
        // retry may succeed, so the caller's answer is "maybe".
        _ => true,
    };
    if retryable {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Misconfigured(detail)
    }
}

/// Error names, as their `Debug` output begins, of the failures the SDK meets
/// before a request leaves: no credentials found (`CredentialsNotLoaded`, or a
/// provider's `InvalidConfiguration`), no region to sign for (the SigV4
/// signer's `MissingSigning*`, a private type), no region or a bad one for the
/// endpoint (`ResolveEndpointError`), no usable auth scheme. The SDK reports
/// them as a dispatch failure of kind "other"; a retry will not conjure what
/// is missing. Their types are private or in crates this one does not depend
/// on, hence the names. A credentials provider that timed out or could not
/// reach its source (`ProviderTimedOut`, `ProviderError`) is not listed: that
/// can pass, so it stays retryable, as does anything unrecognised.
const SETUP_FAILURES: &[&str] = &[
    "CredentialsNotLoaded",
    "InvalidConfiguration",
    "MissingSigningRegion",
    "MissingSigningName",
    "MissingOperationSigningConfig",
    "WrongIdentityType",
    "ResolveEndpointError",
    "NoMatchingAuthScheme",
];

/// Connection refused or reset, timeouts, a hint to retry: retryable. A
/// failure before the request left, for lack of configuration: not. (Only the
/// SDK's "other" dispatch failures carry those causes; scanning every kind
/// keeps the rule one sentence.)
fn is_retryable_dispatch(error: &ConnectorError) -> bool {
    let mut cause = error.source();
    while let Some(current) = cause {
        let name = format!("{current:?}");
        if SETUP_FAILURES.iter().any(|marker| name.starts_with(marker)) {
            return false;
        }
        cause = current.source();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_are_the_documented_names() {
        let cases = [
            (
                LockError::Unavailable {
                    lock_name: "a".into(),
                    holder: "b".into(),
                    expires_at: "c".into(),
                    limit: 1,
                    live_holders: vec![("b".into(), "c".into())],
                },
                "LockUnavailable",
            ),
            (
                LockError::WaitTimeout {
                    lock_name: "a".into(),
                    holder: "b".into(),
                    expires_at: "c".into(),
                    limit: 1,
                    live_holders: vec![("b".into(), "c".into())],
                    max_wait_seconds: 1,
                },
                "LockWaitTimeout",
            ),
            (
                LockError::invalid("owner", "is required"),
                "InvalidLockRequest",
            ),
            (
                StoreError::Unavailable("x".into()).into(),
                "LockStoreUnavailable",
            ),
            (
                StoreError::Misconfigured("x".into()).into(),
                "LockStoreMisconfigured",
            ),
        ];
        for (error, expected) in cases {
            let diagnostic = Diagnostic::from(error);
            assert_eq!(diagnostic.error_type, expected);
            let message: serde_json::Value =
                serde_json::from_str(&diagnostic.error_message).expect("message is JSON");
            assert!(message["message"].is_string());
        }
    }

    #[test]
    fn a_request_that_cannot_be_built_is_misconfigured_and_a_timeout_is_not() {
        type Failure = SdkError<aws_sdk_dynamodb::operation::get_item::GetItemError, HttpResponse>;
        let unbuildable = Failure::construction_failure("a required field is missing");
        assert!(matches!(
            classify("GetItem", unbuildable),
            StoreError::Misconfigured(_)
        ));
        let timed_out = Failure::timeout_error("no answer in time");
        assert!(matches!(
            classify("GetItem", timed_out),
            StoreError::Unavailable(_)
        ));
    }

    #[test]
    fn a_replicated_write_conflict_is_worth_a_retry() {
        // DynamoDB documents it as retryable (multi-Region strongly consistent
        // global tables); the SDK's own retries may run out on it.
        use aws_sdk_dynamodb::error::ErrorMetadata;
        use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
        use aws_sdk_dynamodb::types::error::ReplicatedWriteConflictException;
        let error = UpdateItemError::ReplicatedWriteConflictException(
            ReplicatedWriteConflictException::builder()
                .message("x")
                .meta(
                    ErrorMetadata::builder()
                        .code("ReplicatedWriteConflictException")
                        .build(),
                )
                .build(),
        );
        let response = HttpResponse::new(400.try_into().expect("a status code"), "".into());
        assert!(matches!(
            classify("UpdateItem", SdkError::service_error(error, response)),
            StoreError::Unavailable(_)
        ));
    }

    #[test]
    fn waiting_on_a_silent_store_keeps_the_wait_s_name() {
        let error = LockError::StoreUnavailableWhileWaiting {
            lock_name: "etl".into(),
            detail: "timeout".into(),
        };
        assert_eq!(error.error_type(), "LockUnavailable");
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["storeUnavailable"], true);
        assert_eq!(message["lockName"], "etl");
    }

    #[test]
    fn contention_message_names_holder_and_expiry() {
        let error = LockError::Unavailable {
            lock_name: "etl".into(),
            holder: "arn:exec:1".into(),
            expires_at: "2026-01-01T00:00:00Z".into(),
            limit: 1,
            live_holders: vec![("arn:exec:1".into(), "2026-01-01T00:00:00Z".into())],
        };
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["holder"], "arn:exec:1");
        assert_eq!(message["expiresAt"], "2026-01-01T00:00:00Z");
        assert_eq!(message["lockName"], "etl");
    }

    #[test]
    fn a_full_semaphore_names_its_limit_its_holders_and_the_first_end() {
        let live_holders: Vec<(String, String)> = (0..12)
            .map(|n| (format!("arn:exec:{n}"), format!("2026-01-01T00:00:{n:02}Z")))
            .collect();
        let error = LockError::Unavailable {
            lock_name: "api".into(),
            holder: "arn:exec:0".into(),
            expires_at: "2026-01-01T00:00:00Z".into(),
            limit: 12,
            live_holders,
        };
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["limit"], 12);
        assert_eq!(message["liveHolders"], 12);
        assert_eq!(message["holders"].as_array().unwrap().len(), LISTED_HOLDERS);
        assert_eq!(message["holders"][0]["owner"], "arn:exec:0");
        let text = message["message"].as_str().unwrap();
        assert!(text.contains("12 live of limit 12"), "{text}");
        assert!(text.contains("and 2 more"), "{text}");
        assert!(
            text.contains("first lease ends at 2026-01-01T00:00:00Z"),
            "{text}"
        );
        assert!(!text.contains("arn:exec:11"), "{text}");
    }
}
