//! # sfn-lock
//!
//! A mutex for AWS Step Functions executions: one conditional write takes a
//! lock for an execution ARN with a lease, a conditional write releases it only
//! for its owner, and a fencing token that rises with every grant lets
//! downstream systems refuse a stale holder.
//!
//! ```no_run
//! use serde_json::json;
//! use sfn_lock::{DynamoStore, EpochMillis, LeaseSeconds, Locker};
//!
//! # async fn demo(client: aws_sdk_dynamodb::Client) -> Result<(), sfn_lock::LockError> {
//! let locker = Locker::new(DynamoStore::new(client, "sfn-locks"), LeaseSeconds::new("leaseSeconds", 900)?);
//! let event = json!({"lockName": "nightly-etl", "owner": "arn:aws:states:eu-west-1:1:execution:etl:run-42"});
//! let lease = locker.acquire(&event, EpochMillis::now()).await?;
//! println!("fencing token {}", lease.fencing_token);
//! locker.release(&event, EpochMillis::now()).await?;
//! # Ok(()) }
//! ```
//!
//! The modules are layers, each naming only those below it (DESIGN.md,
//! "Layers"; `tests/layers` checks it): `vocab` → `ports` → `aws` → `store`
//! → the services (`sweep`, `metrics`, `locker`) → `lambda`. `DESIGN.md` at
//! the repository root gives the table, each operation's exact condition, and
//! the edge cases.

pub mod aws;
pub mod lambda;
pub(crate) mod locker;
pub mod metrics;
pub mod ports;
pub mod store;
pub mod sweep;
pub(crate) mod vocab;

mod compat;
#[allow(deprecated)]
pub use compat::*;

pub use aws::waker::SfnWaker;
pub use locker::{Locker, DEFAULT_LEASE_SECONDS};
pub use ports::store::{LockStore, Reclaimed};
pub use ports::wake::{Wake, WakeOutcome};
pub use store::any::AnyStore;
#[cfg(feature = "s3")]
pub use store::document::s3::S3Store;
#[cfg(feature = "ssm")]
pub use store::document::ssm::SsmStore;
pub use store::dynamodb::DynamoStore;
pub use store::url::StoreUrl;
pub use vocab::answer::{AcquireAnswer, AcquireResponse, QueuedResponse, ReleaseResponse};
pub use vocab::error::{LockError, StoreError};
pub use vocab::model::{
    AcquireOutcome, Contention, EpochMillis, Holder, Lease, LockName, Outcome, Owner,
    ReleaseOutcome, MAX_LEASE_SECONDS, MAX_LOCK_NAME_BYTES,
};
pub use vocab::request::{
    AcquireRequest, LeaseSeconds, Limit, ReleaseRequest, WaitBound, Waiting, MAX_LIMIT,
};
pub use vocab::task_token::TaskToken;
pub use vocab::view::{Grant, LockList, LockView, DEFAULT_LIST_MAX, MAX_LIST_MAX};
