//! The mutex format and the semaphore's permits on one item: an item written
//! by the previous version keeps working, callers that disagree on `limit`
//! never admit more than their own limit, a release finds the caller's grant
//! whichever format it has, and the sweep finds permits through their markers.

use crate::common;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{client, counted_store, get_item, table_name, unique};
use sfn_lock::store::dynamodb::permits::{marker_key, permit_names, HOLDER_COUNT};
use sfn_lock::{
    AcquireOutcome, EpochMillis, Lease, LeaseSeconds, Limit, LockName, LockStore, Owner,
    ReleaseOutcome,
};

fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

fn limit(n: i64) -> Limit {
    Limit::new("limit", n).unwrap()
}

fn owner(name: &str) -> Owner {
    Owner::new(format!("arn:exec:{name}")).unwrap()
}

fn granted(outcome: AcquireOutcome) -> Lease {
    match outcome {
        AcquireOutcome::Granted(lease) => lease,
        other => panic!("expected a new grant, got {other:?}"),
    }
}

fn held_by(outcome: AcquireOutcome) -> Vec<String> {
    match outcome {
        AcquireOutcome::Held(contention) => {
            contention.holders.into_iter().map(|h| h.owner).collect()
        }
        other => panic!("expected the lock held, got {other:?}"),
    }
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

/// An item exactly as the previous version wrote it: no `holderCount`.
async fn put_previous_format(lock: &LockName, holder: &Owner, token: i64, expires_at: EpochMillis) {
    let item: HashMap<String, AttributeValue> = [
        ("lockName", s(lock.as_str())),
        ("owner", s(holder.as_str())),
        ("acquiredAt", n(expires_at.0 - 60_000)),
        ("expiresAt", n(expires_at.0)),
        ("fencingToken", n(token)),
        ("ttl", n(expires_at.as_epoch_seconds_ceil() + 86_400)),
        ("releasedBy", s("arn:exec:earlier")),
        ("releasedToken", n(token - 1)),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    client()
        .await
        .put_item()
        .table_name(table_name())
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn an_item_of_the_previous_version_is_renewed_released_taken_and_swept() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("previous-format")).unwrap();
    let now = EpochMillis::now();
    put_previous_format(&lock, &owner("old"), 41, now.plus_seconds(60)).await;

    let renewed = store
        .acquire(&lock, &owner("old"), lease(120), now)
        .await
        .unwrap();
    match renewed {
        AcquireOutcome::Renewed(lease) => assert_eq!(lease.fencing_token, 41),
        other => panic!("expected a renewal, got {other:?}"),
    }
    assert_eq!(
        held_by(
            store
                .acquire(&lock, &owner("new"), lease(60), now)
                .await
                .unwrap()
        ),
        ["arn:exec:old"]
    );
    requests.take();
    let released = store.release(&lock, &owner("old"), now).await.unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert_eq!(requests.take(), 1, "a mutex release stays one write");

    let taken = granted(
        store
            .acquire(&lock, &owner("new"), lease(60), now)
            .await
            .unwrap(),
    );
    assert_eq!(taken.fencing_token, 42);
    let found = store.locks_held_by(&owner("new")).await.unwrap();
    assert_eq!(found, std::slice::from_ref(&lock));
    let swept = store
        .release_granted_before(&lock, &owner("new"), now, now)
        .await
        .unwrap();
    assert_eq!(swept, ReleaseOutcome::Released);
}

#[tokio::test]
async fn a_live_mutex_holder_blocks_a_semaphore_and_permits_block_a_mutex() {
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("mixed")).unwrap();
    let now = EpochMillis::now();
    put_previous_format(&lock, &owner("mutex"), 7, now.plus_seconds(60)).await;

    // Raising the limit while the mutex holder runs: it keeps the lock alone.
    let waiting = store
        .acquire_with_limit(&lock, &owner("sem"), lease(60), limit(3), now)
        .await
        .unwrap();
    assert_eq!(held_by(waiting), ["arn:exec:mutex"]);

    // Once its lease ran out, the semaphore takes over in the permit format.
    let later = now.plus_seconds(61);
    let permit = granted(
        store
            .acquire_with_limit(&lock, &owner("sem"), lease(60), limit(3), later)
            .await
            .unwrap(),
    );
    assert!(permit.fencing_token > 7);
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert!(
        !item.contains_key("owner"),
        "the expired mutex holder is gone"
    );
    assert!(item.contains_key(&permit_names("arn:exec:sem").0));

    // A mutex caller (limit lowered back to 1) waits for the live permit ...
    let mutex = store
        .acquire(&lock, &owner("one"), lease(60), later)
        .await
        .unwrap();
    assert_eq!(held_by(mutex), ["arn:exec:sem"]);
    // ... and after it expired, removes it and holds the lock in the mutex format.
    let last = later.plus_seconds(61);
    let lease_one = granted(
        store
            .acquire(&lock, &owner("one"), lease(60), last)
            .await
            .unwrap(),
    );
    assert!(lease_one.fencing_token > permit.fencing_token);
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(item[HOLDER_COUNT], n(0));
    assert_eq!(item["owner"], s("arn:exec:one"));
    // The expired permit holder's late release changes nothing.
    let late = store
        .release_with_limit(&lock, &owner("sem"), limit(3), last)
        .await
        .unwrap();
    assert_eq!(late, ReleaseOutcome::NotHeld);
    assert_eq!(
        get_item(&client().await, lock.as_str()).await.unwrap()["owner"],
        s("arn:exec:one")
    );
}

#[tokio::test]
async fn a_lower_limit_admits_no_more_than_itself_while_a_higher_one_fills_up() {
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("limit-change")).unwrap();
    let now = EpochMillis::now();
    for name in ["a", "b", "c"] {
        granted(
            store
                .acquire_with_limit(&lock, &owner(name), lease(60), limit(5), now)
                .await
                .unwrap(),
        );
    }
    // A caller still on limit 3 sees three holders: full, for it.
    let lower = store
        .acquire_with_limit(&lock, &owner("d"), lease(60), limit(3), now)
        .await
        .unwrap();
    assert_eq!(held_by(lower).len(), 3);
    // Callers on limit 5 fill the remaining two permits, no more.
    for name in ["e", "f"] {
        granted(
            store
                .acquire_with_limit(&lock, &owner(name), lease(60), limit(5), now)
                .await
                .unwrap(),
        );
    }
    let full = store
        .acquire_with_limit(&lock, &owner("g"), lease(60), limit(5), now)
        .await
        .unwrap();
    assert_eq!(held_by(full).len(), 5);
}

#[tokio::test]
async fn a_release_without_the_limit_hint_still_frees_the_permit_in_two_writes() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("hint")).unwrap();
    let now = EpochMillis::now();
    let first = granted(
        store
            .acquire_with_limit(&lock, &owner("a"), lease(60), limit(2), now)
            .await
            .unwrap(),
    );
    granted(
        store
            .acquire_with_limit(&lock, &owner("b"), lease(60), limit(2), now)
            .await
            .unwrap(),
    );
    requests.take();
    let released = store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert_eq!(
        requests.take(),
        3,
        "mutex write misses, permit write, marker delete"
    );
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(item[HOLDER_COUNT], n(1));
    assert_eq!(item["releasedBy"], s("arn:exec:a"));
    assert_eq!(item["releasedToken"], n(first.fencing_token as i64));
    let marker = get_item(&client().await, &marker_key(&lock, &owner("a"))).await;
    assert!(marker.is_none(), "a released permit's marker is deleted");
}

#[tokio::test]
async fn the_sweep_finds_an_ended_owners_permits_through_their_markers() {
    let (store, _) = counted_store().await;
    let owner = owner(&unique("ended"));
    let (one, two) = (
        LockName::new(unique("sweep-sem-1")).unwrap(),
        LockName::new(unique("sweep-sem-2")).unwrap(),
    );
    let now = EpochMillis::now();
    for lock in [&one, &two] {
        granted(
            store
                .acquire_with_limit(lock, &owner, lease(600), limit(4), now)
                .await
                .unwrap(),
        );
    }
    let mut found = store.locks_held_by(&owner).await.unwrap();
    found.sort();
    let mut expected = vec![one.clone(), two.clone()];
    expected.sort();
    assert_eq!(found, expected);
    for lock in &found {
        let swept = store
            .release_granted_before(lock, &owner, now, now)
            .await
            .unwrap();
        assert_eq!(swept, ReleaseOutcome::Released);
        assert_eq!(
            get_item(&client().await, lock.as_str()).await.unwrap()[HOLDER_COUNT],
            n(0)
        );
    }
    assert!(store.locks_held_by(&owner).await.unwrap().is_empty());

    // A later grant of the same owner is not the sweep's to free.
    let regrant = granted(
        store
            .acquire_with_limit(&one, &owner, lease(600), limit(4), now.plus_seconds(40))
            .await
            .unwrap(),
    );
    match store
        .release_granted_before(&one, &owner, now, now)
        .await
        .unwrap()
    {
        ReleaseOutcome::HeldByOther(holder) => {
            assert_eq!(holder.owner, owner.as_str());
            assert_eq!(holder.fencing_token, regrant.fencing_token);
        }
        other => panic!("expected the later grant left alone, got {other:?}"),
    }
}
