//! The three stores as the explorer runs them: the library's own store code on
//! SDK clients whose HTTP goes through the wire (the callers'), or straight to
//! the local server (the explorer's own reads, which must not be scheduled).

use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use sfn_lock::any_store::s3_client;
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
    let http = sfn_lock::https::https_client().unwrap_or_else(|error| panic!("{error}"));
    sdk(http).await
}

pub fn build(kind: Kind, sdk: &SdkConfig, run: &str) -> AnyStore {
    match kind {
        Kind::DynamoDb => {
            let table = std::env::var("SFN_LOCK_TABLE").unwrap_or_else(|_| {
                panic!("SFN_LOCK_TABLE is not set: run under scripts/local-stack.sh")
            });
            let sfn = sfn_lock::lambda::waker_client(sdk);
            AnyStore::DynamoDb(
                DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table)
                    .with_waker(Arc::new(SfnWaker::new(sfn))),
            )
        }
        Kind::S3 => {
            let bucket = std::env::var("SFN_LOCK_BUCKET").unwrap_or_else(|_| {
                panic!("SFN_LOCK_BUCKET is not set: run under scripts/local-stack.sh")
            });
            AnyStore::S3(S3Store::s3(
                s3_client(sdk),
                bucket,
                format!("explore/{run}/"),
            ))
        }
        Kind::Ssm => AnyStore::Ssm(SsmStore::ssm(
            aws_sdk_ssm::Client::new(sdk),
            format!("/sfn-lock-explore/{run}"),
        )),
    }
}
