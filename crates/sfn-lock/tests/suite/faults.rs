//! Faults between the lock and its store, at the wire.

use crate::common;

use aws_sdk_dynamodb::config::Region;
use aws_sdk_dynamodb::types::AttributeValue;
use common::lossy_proxy::{losing_first_answer, store_via};
use common::{client, closing_endpoint, get_item, table_name, unique};
use sfn_lock::aws::config::sdk_config;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockError, LockName, LockStore, Owner,
    StoreError,
};

#[tokio::test]
async fn a_lost_acquire_response_is_recovered_by_the_retry_with_the_same_token() {
    let (proxy, _) = losing_first_answer(async {}).await;
    let store = store_via(&proxy).await;
    let lock = LockName::new(unique("lost-response")).unwrap();
    let owner = Owner::new("arn:exec:unlucky").unwrap();
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();

    // The first answer is lost on the wire. Whether the SDK's own retry
    // recovers it or the error reaches the caller (as Step Functions would see
    // it), the grant must not be taken twice, and the caller must not wait on itself.
    let first = store
        .acquire(&lock, &owner, lease, EpochMillis::now())
        .await;
    let retried = match first {
        Ok(outcome) => outcome,
        Err(StoreError::Unavailable(_)) => store
            .acquire(&lock, &owner, lease, EpochMillis::now())
            .await
            .unwrap(),
        Err(other) => panic!("a dropped response is retryable, got {other:?}"),
    };

    let renewed = match retried {
        AcquireOutcome::Renewed(lease) => lease,
        other => {
            panic!("the landed grant belongs to the caller, so the retry renews it: {other:?}")
        }
    };
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(
        item["fencingToken"],
        AttributeValue::N(renewed.fencing_token.to_string())
    );
    assert_eq!(item["owner"], AttributeValue::S(owner.to_string()));
}

/// The error an acquire against `store` fails with, as `(store error, errorType)`.
async fn acquire_failure(store: &DynamoStore) -> (StoreError, &'static str) {
    let lock = LockName::new("anything").unwrap();
    let owner = Owner::new("arn:exec:any").unwrap();
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();
    let error = store
        .acquire(&lock, &owner, lease, EpochMillis::now())
        .await
        .unwrap_err();
    let error_type = LockError::from(error.clone()).error_type();
    (error, error_type)
}

#[tokio::test]
async fn an_unreachable_store_is_lock_store_unavailable() {
    let store = store_via(&closing_endpoint().await).await;

    let (error, error_type) = acquire_failure(&store).await;

    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    assert_eq!(error_type, "LockStoreUnavailable");
}

#[tokio::test]
async fn a_missing_table_is_lock_store_misconfigured() {
    let store = DynamoStore::new(client().await, "no-such-table");

    let (error, error_type) = acquire_failure(&store).await;

    assert!(matches!(error, StoreError::Misconfigured(_)), "{error:?}");
    assert_eq!(error_type, "LockStoreMisconfigured");
}

/// A client for the local server built from the test's SDK configuration, then
/// changed by `edit` (to take away its credentials or its region).
async fn store_with(edit: impl FnOnce(&mut aws_sdk_dynamodb::config::Builder)) -> DynamoStore {
    let mut builder = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await);
    edit(&mut builder);
    DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(builder.build()),
        table_name(),
    )
}

// A client with no credentials provider at all sends its requests unsigned:
// moto accepts them (so there is no test of it here); DynamoDB answers a 4xx
// service error, which is LockStoreMisconfigured already.

#[tokio::test]
#[allow(deprecated)] // ProfileFiles' replacement lives in aws-runtime, not a dependency
async fn credentials_that_cannot_be_found_are_lock_store_misconfigured() {
    // What a function gets when its environment has no credentials: a
    // provider that looks and finds none (here, a profile nobody defined).
    let empty = std::env::temp_dir().join(unique("sfn-lock-no-credentials"));
    std::fs::write(&empty, "").unwrap();
    let files = aws_config::profile::profile_file::ProfileFiles::builder()
        .with_file(
            aws_config::profile::profile_file::ProfileFileKind::Credentials,
            &empty,
        )
        .with_file(
            aws_config::profile::profile_file::ProfileFileKind::Config,
            &empty,
        )
        .build();
    // The SDK crates bring no HTTPS client of their own (src/https.rs): a
    // provider built outside sdk_config is given ours.
    let http_client = sfn_lock::aws::https::https_client().expect("the built-in roots");
    let provider = aws_config::profile::ProfileFileCredentialsProvider::builder()
        .configure(
            &aws_config::provider_config::ProviderConfig::empty().with_http_client(http_client),
        )
        .profile_files(files)
        .profile_name("sfn-lock-nobody")
        .build();
    let store = store_with(|builder| {
        builder.set_credentials_provider(Some(
            aws_sdk_dynamodb::config::SharedCredentialsProvider::new(provider),
        ));
    })
    .await;

    let (error, error_type) = acquire_failure(&store).await;
    let _ = std::fs::remove_file(&empty);

    assert!(matches!(error, StoreError::Misconfigured(_)), "{error:?}");
    assert_eq!(error_type, "LockStoreMisconfigured");
}

#[tokio::test]
async fn no_region_to_sign_for_is_lock_store_misconfigured() {
    let store = store_with(|builder| {
        builder.set_region(None::<Region>);
    })
    .await;

    let (error, error_type) = acquire_failure(&store).await;

    assert!(matches!(error, StoreError::Misconfigured(_)), "{error:?}");
    assert_eq!(error_type, "LockStoreMisconfigured");
}

#[tokio::test]
async fn no_region_to_find_the_endpoint_is_lock_store_misconfigured() {
    // As in Lambda, no endpoint URL: the endpoint rules need the region.
    let store = store_with(|builder| {
        builder.set_region(None::<Region>);
        builder.set_endpoint_url(None);
    })
    .await;

    let (error, error_type) = acquire_failure(&store).await;

    assert!(matches!(error, StoreError::Misconfigured(_)), "{error:?}");
    assert_eq!(error_type, "LockStoreMisconfigured");
}
