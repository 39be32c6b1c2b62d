//! What an SDK failure means for a lock: worth retrying (the store may have
//! taken the write: `StoreError::Unavailable`) or not (`Misconfigured`).

use std::error::Error as _;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{
    ConnectorError, DisplayErrorContext, ProvideErrorMetadata, SdkError,
};

use crate::vocab::error::StoreError;

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
}
