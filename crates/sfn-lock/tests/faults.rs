//! Faults between the lock and its store, at the wire.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{client, get_item, table_name, unique};
use sfn_lock::lambda::sdk_config;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockError, LockName, LockStore, Owner,
    StoreError,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A store whose requests go through `endpoint` instead of the local server.
async fn store_via(endpoint: &str) -> DynamoStore {
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        .build();
    DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), table_name())
}

/// A TCP proxy to the local server that lets the first request through and
/// then drops its response: the write lands, the caller never hears of it.
async fn response_dropping_proxy() -> String {
    let upstream = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB: run under scripts/local-stack.sh")
        .trim_start_matches("http://")
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let dropped_one = Arc::new(AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((mut caller, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let drop_this = !dropped_one.swap(true, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut server = TcpStream::connect(&upstream).await.unwrap();
                if drop_this {
                    let mut request = vec![0_u8; 64 * 1024];
                    let mut response = [0_u8; 1];
                    let (mut from_server, mut to_server) = server.split();
                    let (mut from_caller, _) = caller.split();
                    // Forward the request until the server starts answering: by then it has written.
                    loop {
                        tokio::select! {
                            read = from_caller.read(&mut request) => match read {
                                Ok(0) | Err(_) => return,
                                Ok(n) => to_server.write_all(&request[..n]).await.unwrap(),
                            },
                            _ = from_server.read_exact(&mut response) => return, // drop it all
                        }
                    }
                } else {
                    let _ = tokio::io::copy_bidirectional(&mut caller, &mut server).await;
                }
            });
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn a_lost_acquire_response_is_recovered_by_the_retry_with_the_same_token() {
    let store = store_via(&response_dropping_proxy().await).await;
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
    // A port that was just free: connections are refused.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let store = store_via(&format!("http://{closed}")).await;

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
