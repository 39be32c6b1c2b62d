//! Operators' reads (`sfn-lock status`, `list`): what `inspect` and
//! `list_held` show, on each store. A listing runs on a store location of its
//! own (a new table, prefix or path), so other tests' locks cannot crowd it.

use crate::common;
use crate::for_every_store;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use common::stores::{bucket, granted, lease, lock, owner};
use common::unique;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::any::s3_client;
use sfn_lock::{AnyStore, DynamoStore, EpochMillis, Limit, LockName, LockStore, S3Store, SsmStore};

for_every_store!(
    a_lock_never_taken_is_free_and_has_no_counter,
    inspect_shows_each_grant_and_the_counter_survives_release,
    an_expired_grant_shows_until_it_is_taken_over,
);

async fn a_lock_never_taken_is_free_and_has_no_counter(store: AnyStore, _: &str) {
    let view = store.inspect(&lock("never")).await.unwrap();
    assert!(view.grants.is_empty(), "{view:?}");
    assert_eq!(view.fencing_token, None);
    assert!(!view.is_held(EpochMillis::now()));
}

async fn inspect_shows_each_grant_and_the_counter_survives_release(store: AnyStore, kind: &str) {
    let (name, now, two) = (
        lock("inspect"),
        EpochMillis::now(),
        Limit::new("limit", 2).unwrap(),
    );
    let mut leases = Vec::new();
    for (who, seconds) in [("arn:a", 60), ("arn:b", 30)] {
        let outcome = store
            .acquire_with_limit(&name, &owner(who), lease(seconds), two, now)
            .await
            .unwrap();
        leases.push(granted(outcome));
    }
    let view = store.inspect(&name).await.unwrap();
    // The first to end first: b's 30 s before a's 60 s.
    let seen: Vec<_> = view
        .grants
        .iter()
        .map(|g| {
            (
                g.owner.as_str(),
                g.fencing_token,
                g.acquired_at,
                g.expires_at,
            )
        })
        .collect();
    let expected: Vec<_> = leases
        .iter()
        .rev()
        .map(|l| {
            (
                l.owner.as_str(),
                l.fencing_token,
                l.acquired_at,
                l.expires_at,
            )
        })
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(view.fencing_token, Some(leases[1].fencing_token));
    assert!(view.is_held(now));
    // Only DynamoDB keeps a queue.
    assert_eq!(view.queue_length, (kind == "dynamodb").then_some(0));

    store
        .release_with_limit(&name, &owner("arn:b"), two, now)
        .await
        .unwrap();
    let view = store.inspect(&name).await.unwrap();
    let owners: Vec<_> = view.grants.iter().map(|g| g.owner.as_str()).collect();
    assert_eq!(owners, ["arn:a"]);
    assert_eq!(view.fencing_token, Some(leases[1].fencing_token));
}

async fn an_expired_grant_shows_until_it_is_taken_over(store: AnyStore, _: &str) {
    let name = lock("expired");
    let long_ago = EpochMillis(EpochMillis::now().0 - 10_000);
    let old = granted(
        store
            .acquire(&name, &owner("arn:gone"), lease(1), long_ago)
            .await
            .unwrap(),
    );
    let view = store.inspect(&name).await.unwrap();
    assert_eq!(view.grants.len(), 1, "{view:?}");
    assert_eq!(view.grants[0].owner, "arn:gone");
    assert!(!view.is_held(EpochMillis::now()), "{view:?}");

    let now = EpochMillis::now();
    let new = granted(
        store
            .acquire(&name, &owner("arn:new"), lease(60), now)
            .await
            .unwrap(),
    );
    let view = store.inspect(&name).await.unwrap();
    let owners: Vec<_> = view.grants.iter().map(|g| g.owner.as_str()).collect();
    assert_eq!(owners, ["arn:new"]);
    assert!(new.fencing_token > old.fencing_token);
}

/// A store location nobody else writes to.
async fn isolated(kind: &str) -> AnyStore {
    let sdk = sdk_config().await;
    match kind {
        "dynamodb" => {
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            let table = unique("list-table");
            client
                .create_table()
                .table_name(&table)
                .billing_mode(BillingMode::PayPerRequest)
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name("lockName")
                        .attribute_type(ScalarAttributeType::S)
                        .build()
                        .unwrap(),
                )
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name("lockName")
                        .key_type(KeyType::Hash)
                        .build()
                        .unwrap(),
                )
                .send()
                .await
                .unwrap();
            AnyStore::DynamoDb(DynamoStore::new(client, table))
        }
        "s3" => AnyStore::S3(S3Store::s3(
            s3_client(&sdk),
            bucket(),
            format!("{}/", unique("list")),
        )),
        _ => AnyStore::Ssm(SsmStore::ssm(
            aws_sdk_ssm::Client::new(&sdk),
            format!("/{}", unique("list")),
        )),
    }
}

for_every_store!(list_shows_the_locks_with_a_grant_and_stops_at_its_bound);

async fn list_shows_the_locks_with_a_grant_and_stops_at_its_bound(_: AnyStore, kind: &str) {
    let store = isolated(kind).await;
    let now = EpochMillis::now();
    let name = |text: &str| LockName::new(text).unwrap();
    let two = Limit::new("limit", 2).unwrap();
    // A mutex, a semaphore with two permits, a lock released, an expired
    // grant nobody took over, and a name that needs encoding.
    for (lock, who, limit, at) in [
        ("mutex", "arn:m", Limit::ONE, now),
        ("semaphore", "arn:s1", two, now),
        ("semaphore", "arn:s2", two, now),
        ("released", "arn:r", Limit::ONE, now),
        ("expired", "arn:e", Limit::ONE, EpochMillis(now.0 - 120_000)),
        ("per-key/ü x", "arn:u", Limit::ONE, now),
    ] {
        let outcome = store
            .acquire_with_limit(&name(lock), &owner(who), lease(60), limit, at)
            .await
            .unwrap();
        granted(outcome);
    }
    store
        .release(&name("released"), &owner("arn:r"), now)
        .await
        .unwrap();

    let list = store.list_held(100).await.unwrap();
    assert!(!list.truncated);
    let mut seen: Vec<_> = list
        .locks
        .iter()
        .map(|view| (view.lock_name.as_str(), view.grants.len()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("expired", 1),
            ("mutex", 1),
            ("per-key/ü x", 1),
            ("semaphore", 2)
        ]
    );

    let bounded = store.list_held(2).await.unwrap();
    assert!(bounded.truncated, "{bounded:?}");
    assert!(bounded.locks.len() <= 2, "{bounded:?}");
}
