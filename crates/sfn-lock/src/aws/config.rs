//! The SDK configuration every client here is built from: the HTTPS client,
//! timeouts short enough to answer inside a function's own timeout, and the
//! standard retries (none for the waker, which retries by hand).

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::BehaviorVersion;
use aws_sdk_dynamodb::config::SharedHttpClient;

use crate::aws::https;
use crate::vocab::error::LockError;

/// A DynamoDB client from the standard AWS environment (`AWS_REGION`,
/// `AWS_ENDPOINT_URL_DYNAMODB`, credentials), with timeouts short enough that
/// an unreachable store becomes `LockStoreUnavailable` well inside the
/// function's own timeout instead of a hung invocation.
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config().await)
}

/// The shared SDK configuration behind [`dynamodb_client`]. A trust store
/// the environment names but that cannot be used ([`crate::aws::https`]) makes every
/// request fail with that error; [`try_sdk_config`] reports it up front.
pub async fn sdk_config() -> aws_config::SdkConfig {
    match https::https_client() {
        Ok(client) => sdk_config_with(client).await,
        Err(error) => sdk_config_with(https::refusing_client(&error)).await,
    }
}

/// [`sdk_config`], or the trust store's configuration error: what the
/// functions build at init, so that a bad bundle is logged once and answered
/// as `LockStoreMisconfigured`.
pub async fn try_sdk_config() -> Result<aws_config::SdkConfig, LockError> {
    Ok(sdk_config_with(https::https_client()?).await)
}

async fn sdk_config_with(http_client: SharedHttpClient) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .timeout_config(timeout_config())
        .retry_config(retry_config())
        .load()
        .await
}

/// Every client's timeouts: a named function, so that the time budget's
/// facts (contract/code-facts.json) are read from what the clients get.
pub(crate) fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(4))
        .build()
}

/// Every client's retries but the waker's ([`waker_client`]).
pub(crate) fn retry_config() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(3)
}

/// The Step Functions client that wakes queued waiters: no SDK retries;
/// [`crate::aws::waker::SfnWaker`] repeats a call itself and says why.
pub fn waker_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sfn::Client {
    let config = aws_sdk_sfn::config::Builder::from(sdk)
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_sfn::Client::from_conf(config)
}
