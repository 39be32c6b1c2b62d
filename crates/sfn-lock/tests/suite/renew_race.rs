//! The renew race: an owner acquiring a lock it already holds makes two
//! writes (the grant, which fails because the lock is held, then the renew),
//! and the lock can change between them. A hook in the SDK client makes that
//! change for real, on the real server, just before each renew is sent, so
//! the race happens every time instead of once in a million.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use common::{client, get_item, table_name, unique};
use sfn_lock::aws::config::sdk_config;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner, StoreError,
};

/// What the other writer does to the item before each renew.
#[derive(Clone, Copy, Debug)]
enum Interference {
    /// The caller's lease ran out and another owner took the lock over.
    TakenOver,
    /// The caller's grant changed under it (a new token, same owner), every time.
    TokenMoved,
}

/// A writer on its own thread and runtime (an SDK client stays on the runtime
/// that made it); the hook blocks until its write has landed.
struct OtherWriter {
    requests: Mutex<Sender<(String, Interference, Sender<()>)>>,
}

impl OtherWriter {
    fn start() -> OtherWriter {
        let (requests, inbox) = channel::<(String, Interference, Sender<()>)>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the other writer");
            runtime.block_on(async {
                let client = client().await;
                while let Ok((lock_name, interference, done)) = inbox.recv() {
                    interfere(&client, &lock_name, interference).await;
                    let _ = done.send(());
                }
            });
        });
        OtherWriter {
            requests: Mutex::new(requests),
        }
    }

    fn interfere(&self, lock_name: &str, interference: Interference) {
        let (done, landed) = channel();
        self.requests
            .lock()
            .expect("writer channel")
            .send((lock_name.to_owned(), interference, done))
            .expect("the other writer is running");
        landed.recv().expect("the other writer's write landed");
    }
}

async fn interfere(client: &Client, lock_name: &str, interference: Interference) {
    let far = (EpochMillis::now().0 + 3_600_000).to_string();
    let update = client
        .update_item()
        .table_name(table_name())
        .key("lockName", AttributeValue::S(lock_name.to_owned()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()));
    let update = match interference {
        Interference::TakenOver => update
            .update_expression(
                "SET #owner = :other, #expiresAt = :far, fencingToken = fencingToken + :one",
            )
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#expiresAt", "expiresAt")
            .expression_attribute_values(":other", AttributeValue::S("arn:exec:taker".into()))
            .expression_attribute_values(":far", AttributeValue::N(far)),
        Interference::TokenMoved => {
            update.update_expression("SET fencingToken = fencingToken + :one")
        }
    };
    update.send().await.expect("the other writer's UpdateItem");
}

/// Counts UpdateItem requests and interferes before every second one: in an
/// acquire those are the renews (each round is a grant, then a renew).
#[derive(Clone)]
struct BeforeEachRenew {
    lock_name: String,
    interference: Interference,
    writer: Arc<OtherWriter>,
    writes: Arc<AtomicUsize>,
}

impl std::fmt::Debug for BeforeEachRenew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeEachRenew")
    }
}

impl Intercept for BeforeEachRenew {
    fn name(&self) -> &'static str {
        "BeforeEachRenew"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let target = context.request().headers().get("x-amz-target");
        if target != Some("DynamoDB_20120810.UpdateItem") {
            return Ok(());
        }
        let write = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if write.is_multiple_of(2) {
            self.writer.interfere(&self.lock_name, self.interference);
        }
        Ok(())
    }
}

/// A lock held by `owner`, and a store whose renews always race `interference`.
async fn held_lock_with_racing_renews(
    owner: &Owner,
    interference: Interference,
) -> (LockName, DynamoStore, Arc<AtomicUsize>) {
    let lock = LockName::new(unique("renew-race")).unwrap();
    let plain = DynamoStore::new(client().await, table_name());
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();
    match plain.acquire(&lock, owner, lease, EpochMillis::now()).await {
        Ok(AcquireOutcome::Granted(_)) => {}
        other => panic!("expected the first grant, got {other:?}"),
    }
    let writes = Arc::new(AtomicUsize::new(0));
    let hook = BeforeEachRenew {
        lock_name: lock.as_str().to_owned(),
        interference,
        writer: Arc::new(OtherWriter::start()),
        writes: writes.clone(),
    };
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .interceptor(hook)
        .build();
    let racing = DynamoStore::new(Client::from_conf(config), table_name());
    (lock, racing, writes)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_between_grant_and_renew_reports_the_new_holder() {
    let owner = Owner::new(unique("arn:exec:renewing")).unwrap();
    let (lock, store, writes) = held_lock_with_racing_renews(&owner, Interference::TakenOver).await;
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();

    let outcome = store
        .acquire(&lock, &owner, lease, EpochMillis::now())
        .await;

    // The renew's condition failed: the caller must not be told it still
    // holds the lock; a fresh round finds the new holder.
    match outcome {
        Ok(AcquireOutcome::Held(held)) => assert_eq!(held.holders[0].owner, "arn:exec:taker"),
        other => panic!("expected the lock held by the taker, got {other:?}"),
    }
    assert_eq!(
        writes.load(Ordering::SeqCst),
        3,
        "grant, renew (lost the race), grant again"
    );
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(item["owner"], AttributeValue::S("arn:exec:taker".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acquire_gives_up_after_three_lost_rounds() {
    let owner = Owner::new(unique("arn:exec:unlucky")).unwrap();
    let (lock, store, writes) =
        held_lock_with_racing_renews(&owner, Interference::TokenMoved).await;
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();

    let outcome = store
        .acquire(&lock, &owner, lease, EpochMillis::now())
        .await;

    match outcome {
        Err(StoreError::Unavailable(message)) => {
            assert!(message.contains("changed hands 3 times"), "{message}")
        }
        other => panic!("expected the store error after three rounds, got {other:?}"),
    }
    assert_eq!(
        writes.load(Ordering::SeqCst),
        6,
        "three rounds of grant and renew, then stop"
    );
}
