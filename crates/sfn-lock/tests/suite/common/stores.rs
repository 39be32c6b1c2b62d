//! The three stores on the local server, for tests that hold every store to
//! the same contract: DynamoDB (the lock table), S3 (a bucket the stack
//! created) and SSM (a path), all served by the serialised moto.

use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::any::s3_client;
use sfn_lock::{
    AcquireOutcome, AnyStore, DynamoStore, Lease, LeaseSeconds, LockError, LockName, Owner,
    S3Store, SsmStore, StoreError,
};

use super::{required_env, table_name, unique, RequestCounter};

pub const S3_PREFIX: &str = "contract/";
pub const SSM_PATH: &str = "/sfn-lock-test/contract";

pub fn bucket() -> String {
    required_env("SFN_LOCK_BUCKET")
}

/// The store `kind` (`dynamodb`, `s3`, `ssm`), requests counted at the wire.
pub async fn counted(kind: &str) -> (AnyStore, RequestCounter) {
    required_env("AWS_ENDPOINT_URL_DYNAMODB");
    let sdk = sdk_config().await;
    let counter = RequestCounter::default();
    let store = match kind {
        "dynamodb" => {
            let config = aws_sdk_dynamodb::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build();
            let client = aws_sdk_dynamodb::Client::from_conf(config);
            AnyStore::DynamoDb(DynamoStore::new(client, table_name()))
        }
        "s3" => {
            let config = s3_client(&sdk)
                .config()
                .to_builder()
                .interceptor(counter.clone())
                .build();
            let client = aws_sdk_s3::Client::from_conf(config);
            AnyStore::S3(S3Store::s3(client, bucket(), S3_PREFIX))
        }
        "ssm" => {
            let config = aws_sdk_ssm::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build();
            AnyStore::Ssm(SsmStore::ssm(
                aws_sdk_ssm::Client::from_conf(config),
                SSM_PATH,
            ))
        }
        other => panic!("no store named {other}"),
    };
    (store, counter)
}

pub async fn store(kind: &str) -> AnyStore {
    counted(kind).await.0
}

/// One test per store for each rule `async fn rule(store: AnyStore, kind: &str)`.
#[macro_export]
macro_rules! for_every_store {
    ($($rule:ident),* $(,)?) => {$(
        mod $rule {
            #[tokio::test]
            async fn dynamodb() {
                super::$rule(super::common::stores::store("dynamodb").await, "dynamodb").await
            }
            #[tokio::test]
            async fn s3() {
                super::$rule(super::common::stores::store("s3").await, "s3").await
            }
            #[tokio::test]
            async fn ssm() {
                super::$rule(super::common::stores::store("ssm").await, "ssm").await
            }
        }
    )*};
}

pub fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

pub fn owner(name: &str) -> Owner {
    Owner::new(name).unwrap()
}

/// The new grant `outcome` must be.
pub fn granted(outcome: AcquireOutcome) -> Lease {
    match outcome {
        AcquireOutcome::Granted(lease) => lease,
        other => panic!("expected a new grant, got {other:?}"),
    }
}

/// A lock name no other test uses.
pub fn lock(prefix: &str) -> LockName {
    LockName::new(unique(prefix)).unwrap()
}

/// The field a refused request names; the refusal is the functions'
/// `InvalidLockRequest`.
pub fn refused_field(result: Result<AcquireOutcome, StoreError>) -> String {
    match result {
        Err(StoreError::Refused { field, rule }) => {
            // The same error the functions answer: InvalidLockRequest naming the field.
            let error = LockError::from(StoreError::Refused {
                field: field.clone(),
                rule,
            });
            assert_eq!(error.error_type(), "InvalidLockRequest");
            field
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
