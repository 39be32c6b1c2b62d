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
//! `DESIGN.md` at the repository root gives the table, each operation's exact
//! condition, and the edge cases.

pub mod any_store;
pub mod cleanup;
#[cfg(test)]
mod contract_facts;
mod deadline;
pub mod document;
pub mod document_store;
pub mod dynamodb;
mod dynamodb_handoff;
mod dynamodb_item;
mod dynamodb_permit_writes;
pub mod dynamodb_permits;
pub mod dynamodb_queue;
mod dynamodb_queued;
mod dynamodb_renew;
mod dynamodb_store;
mod dynamodb_view;
mod dynamodb_wakes;
mod error;
pub mod executions;
pub mod https;
pub mod lambda;
pub mod listing_pace;
mod lock;
pub mod metrics;
mod metrics_emf;
mod model;
pub mod queue;
pub mod reconcile;
mod reconcile_reclaim;
mod request;
#[cfg(feature = "s3")]
pub mod s3;
pub mod service_clock;
#[cfg(feature = "ssm")]
pub mod ssm;
#[cfg(feature = "ssm")]
mod ssm_calls;
#[cfg(feature = "ssm")]
mod ssm_generations;
#[cfg(feature = "ssm")]
mod ssm_markers;
#[cfg(feature = "ssm")]
mod ssm_read;
#[cfg(feature = "ssm")]
mod ssm_reclaim;
#[cfg(feature = "ssm")]
mod ssm_window;
mod store;
pub mod store_names;
pub mod store_url;
pub mod sweep_policy;
mod view;

pub use any_store::AnyStore;
pub use dynamodb::DynamoStore;
pub use error::{LockError, StoreError};
pub use lock::{
    AcquireAnswer, AcquireResponse, Locker, QueuedResponse, ReleaseResponse, DEFAULT_LEASE_SECONDS,
};
pub use model::{
    AcquireOutcome, Contention, EpochMillis, Holder, Lease, LockName, Outcome, Owner,
    ReleaseOutcome, MAX_LEASE_SECONDS,
};
pub use queue::{SfnWaker, TaskToken, Wake, WakeOutcome};
pub use request::{
    AcquireRequest, LeaseSeconds, Limit, ReleaseRequest, WaitBound, Waiting, MAX_LIMIT,
};
#[cfg(feature = "s3")]
pub use s3::S3Store;
#[cfg(feature = "ssm")]
pub use ssm::SsmStore;
pub use store::{LockStore, Reclaimed};
pub use store_url::StoreUrl;
pub use view::{Grant, LockList, LockView, DEFAULT_LIST_MAX, MAX_LIST_MAX};
