//! The store `LOCK_STORE_URL` names, as one type the functions hold.

use crate::ports::store::LockStore;
#[cfg(feature = "s3")]
use crate::store::document::s3::S3Store;
#[cfg(feature = "ssm")]
use crate::store::document::ssm::SsmStore;
use crate::store::dynamodb::DynamoStore;
use crate::store::url::StoreUrl;
use crate::vocab::error::{LockError, StoreError};
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::vocab::request::{LeaseSeconds, Limit, Waiting};
use crate::vocab::view::{LockList, LockView};

/// One of the three stores.
#[derive(Clone, Debug)]
pub enum AnyStore {
    DynamoDb(DynamoStore),
    #[cfg(feature = "s3")]
    S3(S3Store),
    #[cfg(feature = "ssm")]
    Ssm(SsmStore),
}

impl AnyStore {
    /// The store `url` names, with clients from `sdk`. A DynamoDB store gets
    /// no waker here: the caller adds one if it hands off queued waiters. A
    /// store this build leaves out (features `s3`, `ssm`) is a configuration
    /// error naming `LOCK_STORE_URL`.
    pub fn from_url(url: &StoreUrl, sdk: &aws_config::SdkConfig) -> Result<Self, LockError> {
        match url {
            StoreUrl::DynamoDb { table } => Ok(AnyStore::DynamoDb(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(sdk),
                table,
            ))),
            #[cfg(feature = "s3")]
            StoreUrl::S3 { bucket, prefix } => {
                Ok(AnyStore::S3(S3Store::s3(s3_client(sdk), bucket, prefix)))
            }
            #[cfg(not(feature = "s3"))]
            StoreUrl::S3 { .. } => Err(left_out("s3")),
            #[cfg(feature = "ssm")]
            StoreUrl::Ssm { path } => Ok(AnyStore::Ssm(SsmStore::ssm(
                aws_sdk_ssm::Client::new(sdk),
                path,
            ))),
            #[cfg(not(feature = "ssm"))]
            StoreUrl::Ssm { .. } => Err(left_out("ssm")),
        }
    }
}

#[cfg(feature = "s3")]
/// An S3 client. A local endpoint (`AWS_ENDPOINT_URL_S3` or
/// `AWS_ENDPOINT_URL`, as in the tests) serves buckets by path, not by host name.
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let local = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|url| !url.trim().is_empty()));
    let config = aws_sdk_s3::config::Builder::from(sdk).force_path_style(local);
    aws_sdk_s3::Client::from_conf(config.build())
}

/// `LOCK_STORE_URL` names a store this build left out.
#[cfg(not(all(feature = "s3", feature = "ssm")))]
fn left_out(feature: &str) -> LockError {
    LockError::invalid(
        "LOCK_STORE_URL",
        format!("names a store these functions were built without (cargo feature `{feature}`)"),
    )
}

/// Every call goes to the store inside. Boxed: the stores' futures nested in
/// the handler's exceed rustc's layout query depth in the binaries otherwise.
macro_rules! each {
    ($store:expr, $inner:ident => $call:expr) => {
        match $store {
            AnyStore::DynamoDb($inner) => Box::pin($call).await,
            #[cfg(feature = "s3")]
            AnyStore::S3($inner) => Box::pin($call).await,
            #[cfg(feature = "ssm")]
            AnyStore::Ssm($inner) => Box::pin($call).await,
        }
    };
}

impl LockStore for AnyStore {
    async fn acquire_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        each!(self, store => store.acquire_with_limit(lock_name, owner, lease, limit, now))
    }

    async fn acquire_or_queue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        waiting: &Waiting,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        each!(self, store => store.acquire_or_queue(lock_name, owner, lease, limit, waiting, now))
    }

    async fn release_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        each!(self, store => store.release_with_limit(lock_name, owner, limit, now))
    }

    async fn release_granted_before(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: EpochMillis,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        each!(self, store => store.release_granted_before(lock_name, owner, granted_before, now))
    }

    async fn locks_held_by(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        each!(self, store => store.locks_held_by(owner))
    }

    async fn inspect(&self, lock_name: &LockName) -> Result<LockView, StoreError> {
        each!(self, store => store.inspect(lock_name))
    }

    async fn list_held(&self, max: usize) -> Result<LockList, StoreError> {
        each!(self, store => store.list_held(max))
    }

    async fn reclaim_idle(&self, max: usize) -> Result<crate::ports::store::Reclaimed, StoreError> {
        each!(self, store => store.reclaim_idle(max))
    }

    async fn queues_to_wake(
        &self,
        max: usize,
        now: EpochMillis,
    ) -> Result<Vec<LockName>, StoreError> {
        each!(self, store => store.queues_to_wake(max, now))
    }

    async fn wake_queue(&self, lock_name: &LockName, now: EpochMillis) -> Result<bool, StoreError> {
        each!(self, store => store.wake_queue(lock_name, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_this_build_left_out_is_a_configuration_error() {
        let sdk = aws_config::SdkConfig::builder().build();
        for url in ["s3://bucket/prefix/", "ssm:///locks"] {
            let url = StoreUrl::parse(url).unwrap();
            let compiled = match &url {
                StoreUrl::S3 { .. } => cfg!(feature = "s3"),
                _ => cfg!(feature = "ssm"),
            };
            match AnyStore::from_url(&url, &sdk) {
                Ok(_) => assert!(compiled, "{url}"),
                Err(LockError::InvalidRequest { field, .. }) => {
                    assert!(!compiled, "{url}");
                    assert_eq!(field, "LOCK_STORE_URL");
                }
                Err(other) => panic!("{url}: {other:?}"),
            }
        }
    }
}
