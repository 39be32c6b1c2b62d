//! A semaphore (`limit` ≥ 2) against the real server: admission, tokens,
//! renew, release, pruning of expired permits, and the requests each costs,
//! counted at the wire. The clock is passed in, so nothing sleeps.

use crate::common;

use common::{client, counted_store, get_item, unique};
use sfn_lock::store::dynamodb::permits::{permit_names, HOLDER_COUNT, MAX_PERMIT_OWNER_BYTES};
use sfn_lock::{
    AcquireOutcome, Contention, EpochMillis, Lease, LeaseSeconds, Limit, LockName, LockStore,
    Owner, ReleaseOutcome, StoreError,
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

fn held(outcome: AcquireOutcome) -> Contention {
    match outcome {
        AcquireOutcome::Held(contention) => contention,
        other => panic!("expected the lock held, got {other:?}"),
    }
}

async fn holder_count(lock: &LockName) -> i64 {
    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("item");
    item[HOLDER_COUNT].as_n().unwrap().parse().unwrap()
}

#[tokio::test]
async fn limit_three_admits_three_with_rising_tokens_then_names_all_three() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("sem-three")).unwrap();
    let now = EpochMillis::now();
    let mut tokens = Vec::new();
    for (index, name) in ["a", "b", "c"].into_iter().enumerate() {
        // Later holders get longer leases, so the first to end is "a".
        let seconds = 60 + index as i64;
        let outcome = store
            .acquire_with_limit(&lock, &owner(name), lease(seconds), limit(3), now)
            .await
            .unwrap();
        let granted = granted(outcome);
        assert_eq!(granted.expires_at, now.plus_seconds(seconds as u32));
        tokens.push(granted.fencing_token);
        assert_eq!(
            requests.take(),
            2,
            "a free permit: the sweep's marker, then one conditional write"
        );
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
    assert_eq!(holder_count(&lock).await, 3);

    let outcome = store
        .acquire_with_limit(&lock, &owner("d"), lease(60), limit(3), now)
        .await
        .unwrap();
    assert_eq!(
        requests.take(),
        2,
        "contention is answered by the failed write"
    );
    let contention = held(outcome);
    assert_eq!(contention.limit.get(), 3);
    let holders: Vec<&str> = contention
        .holders
        .iter()
        .map(|h| h.owner.as_str())
        .collect();
    assert_eq!(holders, ["arn:exec:a", "arn:exec:b", "arn:exec:c"]);
    assert_eq!(contention.holders[0].fencing_token, tokens[0]);
}

#[tokio::test]
async fn renew_keeps_token_and_permit_and_release_frees_only_the_callers() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("sem-renew")).unwrap();
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

    let later = now.plus_seconds(30);
    let renewed = match store
        .acquire_with_limit(&lock, &owner("a"), lease(60), limit(2), later)
        .await
        .unwrap()
    {
        AcquireOutcome::Renewed(lease) => lease,
        other => panic!("expected a renewal, got {other:?}"),
    };
    assert_eq!(requests.take(), 3, "marker, failed grant, renew");
    assert_eq!(renewed.fencing_token, first.fencing_token);
    assert_eq!(renewed.acquired_at, first.acquired_at);
    assert_eq!(renewed.expires_at, later.plus_seconds(60));
    assert_eq!(holder_count(&lock).await, 2);

    let released = store
        .release_with_limit(&lock, &owner("a"), limit(2), later)
        .await
        .unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert_eq!(
        requests.take(),
        2,
        "one conditional write, then the marker's delete"
    );
    assert_eq!(holder_count(&lock).await, 1);
    let again = store
        .release_with_limit(&lock, &owner("a"), limit(2), later)
        .await
        .unwrap();
    assert_eq!(again, ReleaseOutcome::NotHeld);

    // b still holds its permit; the freed one goes to c.
    let c = granted(
        store
            .acquire_with_limit(&lock, &owner("c"), lease(60), limit(2), later)
            .await
            .unwrap(),
    );
    assert!(c.fencing_token > first.fencing_token);
    let full = held(
        store
            .acquire_with_limit(&lock, &owner("d"), lease(60), limit(2), later)
            .await
            .unwrap(),
    );
    assert_eq!(full.holders.len(), 2);
}

#[tokio::test]
async fn an_expired_permit_is_pruned_by_the_next_acquire_in_one_more_write() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("sem-prune")).unwrap();
    let now = EpochMillis::now();
    let crashed = granted(
        store
            .acquire_with_limit(&lock, &owner("crashed"), lease(10), limit(2), now)
            .await
            .unwrap(),
    );
    granted(
        store
            .acquire_with_limit(&lock, &owner("live"), lease(600), limit(2), now)
            .await
            .unwrap(),
    );
    requests.take();

    let after = now.plus_seconds(11);
    let taker = granted(
        store
            .acquire_with_limit(&lock, &owner("taker"), lease(60), limit(2), after)
            .await
            .unwrap(),
    );
    assert_eq!(requests.take(), 3, "marker, failed grant, prune-and-grant");
    assert!(taker.fencing_token > crashed.fencing_token);
    assert_eq!(holder_count(&lock).await, 2);
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert!(!item.contains_key(&permit_names("arn:exec:crashed").0));

    // The crashed holder's late release changes nothing and says so.
    let late = store
        .release_with_limit(&lock, &owner("crashed"), limit(2), after)
        .await
        .unwrap();
    assert_eq!(late, ReleaseOutcome::NotHeld);
    assert_eq!(holder_count(&lock).await, 2);
}

#[tokio::test]
async fn an_owner_whose_permit_expired_gets_a_new_token_not_a_renewal() {
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("sem-own-expired")).unwrap();
    let now = EpochMillis::now();
    let first = granted(
        store
            .acquire_with_limit(&lock, &owner("a"), lease(10), limit(2), now)
            .await
            .unwrap(),
    );
    let again = granted(
        store
            .acquire_with_limit(
                &lock,
                &owner("a"),
                lease(10),
                limit(2),
                now.plus_seconds(11),
            )
            .await
            .unwrap(),
    );
    assert!(again.fencing_token > first.fencing_token);
    assert_eq!(holder_count(&lock).await, 1);
}

#[tokio::test]
async fn a_semaphore_owner_too_long_for_the_item_is_refused_before_any_write() {
    let (store, requests) = counted_store().await;
    let lock = LockName::new(unique("sem-long-owner")).unwrap();
    let long = Owner::new("x".repeat(MAX_PERMIT_OWNER_BYTES + 1)).unwrap();
    let refused = store
        .acquire_with_limit(&lock, &long, lease(60), limit(2), EpochMillis::now())
        .await;
    match refused {
        Err(StoreError::Refused { field, rule }) => {
            assert_eq!(field, "owner");
            assert!(rule.contains("256"), "{rule}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(requests.take(), 0);
    assert!(get_item(&client().await, lock.as_str()).await.is_none());
    // At the bound it is accepted.
    let longest = Owner::new("x".repeat(MAX_PERMIT_OWNER_BYTES)).unwrap();
    granted(
        store
            .acquire_with_limit(&lock, &longest, lease(60), limit(2), EpochMillis::now())
            .await
            .unwrap(),
    );
}

#[tokio::test]
async fn an_owner_whose_expired_permit_is_not_among_the_oldest_still_gets_a_new_grant() {
    // More expired permits than one prune removes (16), the caller's the
    // latest to expire: the caller's own must be among those removed.
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("sem-prune-own")).unwrap();
    let now = EpochMillis::now();
    for index in 0..17 {
        let seconds = if index == 16 { 60 } else { 10 };
        granted(
            store
                .acquire_with_limit(
                    &lock,
                    &owner(&format!("o{index}")),
                    lease(seconds),
                    limit(17),
                    now,
                )
                .await
                .unwrap(),
        );
    }
    let later = now.plus_seconds(61);
    let again = granted(
        store
            .acquire_with_limit(&lock, &owner("o16"), lease(60), limit(17), later)
            .await
            .unwrap(),
    );
    assert_eq!(again.acquired_at, later);
    assert!(holder_count(&lock).await <= 17);
}

#[tokio::test]
async fn a_limit_lowered_far_below_many_expired_permits_still_gets_its_grant() {
    // 60 expired permits, a caller on limit 2: four removal writes (16 each)
    // before there is room. Each is progress, never a lost round.
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("sem-lowered")).unwrap();
    let now = EpochMillis::now();
    for index in 0..60 {
        granted(
            store
                .acquire_with_limit(
                    &lock,
                    &owner(&format!("o{index}")),
                    lease(10),
                    limit(60),
                    now,
                )
                .await
                .unwrap(),
        );
    }
    let later = now.plus_seconds(11);
    granted(
        store
            .acquire_with_limit(&lock, &owner("late"), lease(60), limit(2), later)
            .await
            .unwrap(),
    );
    assert_eq!(holder_count(&lock).await, 1);
}

#[tokio::test]
async fn a_grant_never_leaves_more_permits_on_the_item_than_the_callers_limit() {
    // 18 expired permits, a caller on limit 2: one batch (16) leaves 2, as
    // many as the limit, so the caller's grant must wait for the next batch.
    let (store, _) = counted_store().await;
    let lock = LockName::new(unique("sem-exact-room")).unwrap();
    let now = EpochMillis::now();
    for index in 0..18 {
        granted(
            store
                .acquire_with_limit(
                    &lock,
                    &owner(&format!("o{index}")),
                    lease(10),
                    limit(18),
                    now,
                )
                .await
                .unwrap(),
        );
    }
    granted(
        store
            .acquire_with_limit(
                &lock,
                &owner("late"),
                lease(60),
                limit(2),
                now.plus_seconds(11),
            )
            .await
            .unwrap(),
    );
    assert_eq!(holder_count(&lock).await, 1);
}
