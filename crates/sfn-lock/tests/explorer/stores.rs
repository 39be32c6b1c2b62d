//! The three stores as the explorer runs them: the library's own store code on
//! SDK clients whose HTTP goes through the wire (the callers'), or straight to
//! the local server (the explorer's own reads, which must not be scheduled).

use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use sfn_lock::store::any::s3_client;
use sfn_lock::{AnyStore, DynamoStore, S3Store, SfnWaker, SsmStore};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    DynamoDb,
    S3,
    Ssm,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::DynamoDb, Kind::S3, Kind::Ssm];

    pub fn name(self) -> &'static str {
        match self {
            Kind::DynamoDb => "dynamodb",
            Kind::S3 => "s3",
            Kind::Ssm => "ssm",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == text)
    }

    /// Only the DynamoDB store keeps a queue.
    pub fn queues(self) -> bool {
        self == Kind::DynamoDb
    }
}

/// An SDK configuration as the functions' (`lambda::sdk_config`): the
/// standard retry mode, three attempts; no timeouts, because the explorer
/// decides when an answer is lost (and the runtime's clock is virtual).
pub async fn sdk(http: SharedHttpClient) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .timeout_config(TimeoutConfig::disabled())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .load()
        .await
}

/// The explorer's own reads: straight to the server, retried, never scheduled.
pub async fn direct_sdk() -> SdkConfig {
    let http = sfn_lock::aws::https::https_client().unwrap_or_else(|error| panic!("{error}"));
    sdk(http).await
}

/// A table of the run's own, as `tests/support/create_table.py` makes the
/// suite's: the reconciler scans the whole table, so a shared one would
/// make each run depend on what earlier runs left.
pub async fn create_table(sdk: &SdkConfig, run: &str) {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, ScalarAttributeType,
    };
    let key = |name: &str| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(KeyType::Hash)
            .build()
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let built = (|| {
        Ok::<_, aws_sdk_dynamodb::error::BuildError>((
            key("lockName")?,
            key("owner")?,
            attribute("lockName")?,
            attribute("owner")?,
        ))
    })();
    let (lock_key, owner_key, lock_attribute, owner_attribute) =
        built.unwrap_or_else(|error| panic!("{error}"));
    let index = GlobalSecondaryIndex::builder()
        .index_name("owner-index")
        .key_schema(owner_key)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    aws_sdk_dynamodb::Client::new(sdk)
        .create_table()
        .table_name(table_name(run))
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(lock_attribute)
        .attribute_definitions(owner_attribute)
        .key_schema(lock_key)
        .global_secondary_indexes(index)
        .send()
        .await
        .unwrap_or_else(|error| panic!("creating the run's table: {error:?}"));
}

pub async fn delete_table(sdk: &SdkConfig, run: &str) {
    let _ = aws_sdk_dynamodb::Client::new(sdk)
        .delete_table()
        .table_name(table_name(run))
        .send()
        .await;
}

fn table_name(run: &str) -> String {
    format!("explore-{run}")
}

/// Each run's clients get retry quotas of their own: the SDK's token bucket
/// is per partition, process-wide, and a run must not inherit what earlier
/// runs' faults spent (a seed would not replay alone as it ran among others).
fn partition(service: &str, run: &str) -> String {
    format!("explore-{service}-{run}")
}

pub fn build(kind: Kind, sdk: &SdkConfig, run: &str) -> AnyStore {
    match kind {
        Kind::DynamoDb => {
            let table = table_name(run);
            let sfn = sfn_lock::aws::config::waker_client(sdk);
            let config = aws_sdk_dynamodb::config::Builder::from(sdk)
                .retry_partition(aws_sdk_dynamodb::config::retry::RetryPartition::new(
                    partition("dynamodb", run),
                ))
                .build();
            AnyStore::DynamoDb(
                DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), table)
                    .with_waker(Arc::new(SfnWaker::new(sfn))),
            )
        }
        Kind::S3 => {
            let bucket = std::env::var("SFN_LOCK_BUCKET").unwrap_or_else(|_| {
                panic!("SFN_LOCK_BUCKET is not set: run under scripts/local-stack.sh")
            });
            let config = s3_client(sdk)
                .config()
                .to_builder()
                .retry_partition(aws_sdk_s3::config::retry::RetryPartition::new(partition(
                    "s3", run,
                )))
                .build();
            AnyStore::S3(S3Store::s3(
                aws_sdk_s3::Client::from_conf(config),
                bucket,
                format!("explore/{run}/"),
            ))
        }
        Kind::Ssm => {
            let config = aws_sdk_ssm::config::Builder::from(sdk)
                .retry_partition(aws_sdk_ssm::config::retry::RetryPartition::new(partition(
                    "ssm", run,
                )))
                .build();
            AnyStore::Ssm(SsmStore::ssm(
                aws_sdk_ssm::Client::from_conf(config),
                format!("/sfn-lock-explore/{run}"),
            ))
        }
    }
}
