//! The store `LOCK_STORE_URL` names, as one type the functions hold.

use aws_sdk_s3::config::Builder as S3ConfigBuilder;

use crate::dynamodb::DynamoStore;
use crate::error::StoreError;
use crate::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::queue::TaskToken;
use crate::request::{LeaseSeconds, Limit};
use crate::s3::S3Store;
use crate::ssm::SsmStore;
use crate::store::LockStore;
use crate::store_url::StoreUrl;

/// One of the three stores.
#[derive(Clone, Debug)]
pub enum AnyStore {
    DynamoDb(DynamoStore),
    S3(S3Store),
    Ssm(SsmStore),
}

impl AnyStore {
    /// The store `url` names, with clients from `sdk`. A DynamoDB store gets
    /// no waker here: the caller adds one if it hands off queued waiters.
    pub fn from_url(url: &StoreUrl, sdk: &aws_config::SdkConfig) -> Self {
        match url {
            StoreUrl::DynamoDb { table } => {
                AnyStore::DynamoDb(DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table))
            }
            StoreUrl::S3 { bucket, prefix } => {
                AnyStore::S3(S3Store::s3(s3_client(sdk), bucket, prefix))
            }
            StoreUrl::Ssm { path } => {
                AnyStore::Ssm(SsmStore::ssm(aws_sdk_ssm::Client::new(sdk), path))
            }
        }
    }
}

/// An S3 client. A local endpoint (`AWS_ENDPOINT_URL_S3` or
/// `AWS_ENDPOINT_URL`, as in the tests) serves buckets by path, not by host name.
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let local = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|url| !url.trim().is_empty()));
    aws_sdk_s3::Client::from_conf(S3ConfigBuilder::from(sdk).force_path_style(local).build())
}

/// Every call goes to the store inside. Boxed: the stores' futures nested in
/// the handler's exceed rustc's layout query depth in the binaries otherwise.
macro_rules! each {
    ($store:expr, $inner:ident => $call:expr) => {
        match $store {
            AnyStore::DynamoDb($inner) => Box::pin($call).await,
            AnyStore::S3($inner) => Box::pin($call).await,
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
        task_token: &TaskToken,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        each!(self, store => store.acquire_or_queue(lock_name, owner, lease, limit, task_token, now))
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
}
