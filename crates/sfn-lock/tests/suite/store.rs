//! The lock's semantics against a real DynamoDB-compatible server (moto), one
//! rule per test. Requests are counted at the wire by an SDK interceptor.
//! The clock is passed in, so expiry is tested without sleeping.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{client, counted_store, get_item, table_name, unique};
use sfn_lock::store::dynamodb::TTL_GRACE_SECONDS;
use sfn_lock::{
    AcquireOutcome, EpochMillis, Lease, LeaseSeconds, LockName, LockStore, Owner, ReleaseOutcome,
};

fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

fn names(lock: &str, owner: &str) -> (LockName, Owner) {
    (LockName::new(lock).unwrap(), Owner::new(owner).unwrap())
}

fn granted(outcome: AcquireOutcome) -> Lease {
    match outcome {
        AcquireOutcome::Granted(lease) => lease,
        other => panic!("expected a new grant, got {other:?}"),
    }
}

#[tokio::test]
async fn a_fresh_grant_is_one_write_with_expiry_and_ttl() {
    let (store, requests) = counted_store().await;
    let (lock, owner) = names(&unique("fresh"), "arn:exec:a");
    let now = EpochMillis::now();

    let lease = granted(store.acquire(&lock, &owner, lease(60), now).await.unwrap());

    assert_eq!(requests.take(), 1, "a fresh grant must be a single request");
    assert_eq!(lease.owner, owner);
    assert_eq!(lease.acquired_at, now);
    assert_eq!(lease.expires_at, now.plus_seconds(60));
    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("lock item");
    assert_eq!(item["owner"], AttributeValue::S("arn:exec:a".into()));
    let ttl: i64 = item["ttl"].as_n().unwrap().parse().unwrap();
    assert_eq!(
        ttl,
        now.plus_seconds(60 + TTL_GRACE_SECONDS)
            .as_epoch_seconds_ceil()
    );
}

#[tokio::test]
async fn contention_names_the_holder_from_the_failed_write_itself() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("contended")).unwrap();
    let (holder, rival) = (
        Owner::new("arn:exec:holder").unwrap(),
        Owner::new("arn:exec:rival").unwrap(),
    );
    let now = EpochMillis::now();
    let held = granted(store.acquire(&lock, &holder, lease(60), now).await.unwrap());
    requests.take();

    let outcome = store
        .acquire(&lock, &rival, lease(60), now.plus_seconds(1))
        .await
        .unwrap();

    assert_eq!(
        requests.take(),
        1,
        "contention is answered by the failed write, not a second read"
    );
    match outcome {
        AcquireOutcome::Held(contention) => {
            assert_eq!(contention.limit.get(), 1);
            assert_eq!(contention.holders.len(), 1);
            let found = &contention.holders[0];
            assert_eq!(found.owner, "arn:exec:holder");
            assert_eq!(found.expires_at, held.expires_at);
            assert_eq!(found.fencing_token, held.fencing_token);
        }
        other => panic!("expected Held, got {other:?}"),
    }
}

#[tokio::test]
async fn the_owner_acquiring_again_renews_with_the_same_token() {
    let (store, requests) = counted_store().await;
    let (lock, owner) = names(&unique("renew"), "arn:exec:retried");
    let now = EpochMillis::now();
    let first = granted(store.acquire(&lock, &owner, lease(60), now).await.unwrap());
    requests.take();

    let later = now.plus_seconds(30);
    let renewed = match store
        .acquire(&lock, &owner, lease(60), later)
        .await
        .unwrap()
    {
        AcquireOutcome::Renewed(lease) => lease,
        other => panic!("expected Renewed, got {other:?}"),
    };

    assert_eq!(
        requests.take(),
        2,
        "a renewal is the failed grant plus one conditional renew"
    );
    assert_eq!(renewed.fencing_token, first.fencing_token);
    assert_eq!(renewed.acquired_at, first.acquired_at);
    assert_eq!(
        renewed.expires_at,
        later.plus_seconds(60),
        "the lease runs from the renewal"
    );
    // TTL moves with the lease: a renewed lock must not be collected a day
    // after its first expiry while it is still held.
    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("lock item");
    let ttl: i64 = item["ttl"].as_n().unwrap().parse().unwrap();
    assert_eq!(
        ttl,
        renewed
            .expires_at
            .plus_seconds(TTL_GRACE_SECONDS)
            .as_epoch_seconds_ceil()
    );
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_although_the_item_still_exists() {
    // moto never runs TTL, like DynamoDB running hours late: the item is still
    // there, so only the condition's expiry comparison can free the lock.
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("expired")).unwrap();
    let (stale, next) = (
        Owner::new("arn:exec:stale").unwrap(),
        Owner::new("arn:exec:next").unwrap(),
    );
    let now = EpochMillis::now();
    let first = granted(store.acquire(&lock, &stale, lease(10), now).await.unwrap());

    let at_expiry = store
        .acquire(&lock, &next, lease(10), now.plus_seconds(10))
        .await
        .unwrap();
    assert!(
        matches!(at_expiry, AcquireOutcome::Held(_)),
        "a lease is live up to its expiry instant"
    );

    let after = EpochMillis(now.plus_seconds(10).0 + 1);
    let taken = granted(store.acquire(&lock, &next, lease(10), after).await.unwrap());
    assert_eq!(taken.owner, next);
    assert!(taken.fencing_token > first.fencing_token);
}

#[tokio::test]
async fn an_owner_whose_lease_expired_gets_a_new_token_not_a_renewal() {
    let (store, _) = counted_store().await;
    let (lock, owner) = names(&unique("own-expired"), "arn:exec:slow");
    let now = EpochMillis::now();
    let first = granted(store.acquire(&lock, &owner, lease(5), now).await.unwrap());

    let again = granted(
        store
            .acquire(&lock, &owner, lease(5), now.plus_seconds(6))
            .await
            .unwrap(),
    );

    assert!(
        again.fencing_token > first.fencing_token,
        "the protection lapsed, so the grant is new"
    );
}

#[tokio::test]
async fn fencing_tokens_rise_across_release_takeover_and_ttl_deletion() {
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("fencing")).unwrap();
    let owners: Vec<Owner> = (0..3)
        .map(|i| Owner::new(format!("arn:exec:{i}")).unwrap())
        .collect();
    let now = EpochMillis::now();
    let mut tokens = Vec::new();

    tokens.push(
        granted(
            store
                .acquire(&lock, &owners[0], lease(5), now)
                .await
                .unwrap(),
        )
        .fencing_token,
    );
    assert_eq!(
        store.release(&lock, &owners[0], now).await.unwrap(),
        ReleaseOutcome::Released
    );
    tokens.push(
        granted(
            store
                .acquire(&lock, &owners[1], lease(5), now)
                .await
                .unwrap(),
        )
        .fencing_token,
    );
    // Taken over after expiry, without a release.
    let later = now.plus_seconds(6);
    tokens.push(
        granted(
            store
                .acquire(&lock, &owners[2], lease(5), later)
                .await
                .unwrap(),
        )
        .fencing_token,
    );
    // TTL deleted the item (moto never does, so delete it by hand).
    client()
        .await
        .delete_item()
        .table_name(table_name())
        .key("lockName", AttributeValue::S(lock.as_str().to_owned()))
        .send()
        .await
        .unwrap();
    let after_deletion = EpochMillis::now().plus_seconds(20);
    tokens.push(
        granted(
            store
                .acquire(&lock, &owners[0], lease(5), after_deletion)
                .await
                .unwrap(),
        )
        .fencing_token,
    );

    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens must strictly rise: {tokens:?}"
    );
}

#[tokio::test]
async fn release_is_one_write_and_idempotent() {
    let (store, requests) = counted_store().await;
    let (lock, owner) = names(&unique("release"), "arn:exec:done");
    let now = EpochMillis::now();
    granted(store.acquire(&lock, &owner, lease(60), now).await.unwrap());
    requests.take();

    assert_eq!(
        store.release(&lock, &owner, now).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(requests.take(), 1);
    assert_eq!(
        store.release(&lock, &owner, now).await.unwrap(),
        ReleaseOutcome::NotHeld
    );
    let never = LockName::new(unique("never-taken")).unwrap();
    assert_eq!(
        store.release(&never, &owner, now).await.unwrap(),
        ReleaseOutcome::NotHeld
    );

    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("the item stays for its counter");
    assert!(
        !item.contains_key("owner"),
        "a released lock has no owner: {item:?}"
    );
}

#[tokio::test]
async fn a_stale_owner_cannot_release_the_new_holders_lock() {
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("stale")).unwrap();
    let (stale, holder) = (
        Owner::new("arn:exec:stale").unwrap(),
        Owner::new("arn:exec:holder").unwrap(),
    );
    let now = EpochMillis::now();
    granted(store.acquire(&lock, &stale, lease(1), now).await.unwrap());
    let current = granted(
        store
            .acquire(&lock, &holder, lease(60), now.plus_seconds(2))
            .await
            .unwrap(),
    );

    match store
        .release(&lock, &stale, now.plus_seconds(3))
        .await
        .unwrap()
    {
        ReleaseOutcome::HeldByOther(found) => assert_eq!(found.owner, "arn:exec:holder"),
        other => panic!("expected HeldByOther, got {other:?}"),
    }
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(item["owner"], AttributeValue::S("arn:exec:holder".into()));
    assert_eq!(
        item["fencingToken"],
        AttributeValue::N(current.fencing_token.to_string())
    );
}
