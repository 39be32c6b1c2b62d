//! The lock's contract, continued (`contract.rs` has grants, renewals,
//! expiry and releases): semaphores, the sweep's calls and lock names, one
//! rule per test, each run once per store (DynamoDB, S3, SSM).

use crate::common;
use crate::for_every_store;

use common::stores::{granted, lease, lock, owner};
use common::unique;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, Limit, LockName, LockStore, Owner, ReleaseOutcome,
};

for_every_store!(
    a_semaphore_admits_limit_holders_each_with_its_own_token,
    the_sweep_release_leaves_a_later_grant_of_the_same_owner,
    locks_held_by_finds_an_owners_locks_until_released,
    any_name_the_contract_accepts_round_trips,
    a_mutex_holder_admits_no_permit_beside_it_and_permits_keep_out_a_mutex,
    a_renewal_from_a_clock_behind_never_shortens_the_lease,
);

/// A renewal computed from an earlier instant (a task retried while its first
/// attempt ran on, a hand-off written by a caller whose clock runs ahead)
/// must not move the expiry back: the holder was told the later one, and a
/// rival let in before it would run beside it.
async fn a_renewal_from_a_clock_behind_never_shortens_the_lease(store: AnyStore, _: &str) {
    for limit in [1, 2] {
        let (name, now) = (lock("renew-behind"), EpochMillis::now());
        let limit = Limit::new("limit", limit).unwrap();
        let ahead = EpochMillis(now.0 + 10_000);
        let (a, b) = (owner("arn:a"), owner("arn:b"));
        let first = granted(
            store
                .acquire_with_limit(&name, &a, lease(60), limit, ahead)
                .await
                .unwrap(),
        );
        let again = store
            .acquire_with_limit(&name, &a, lease(60), limit, now)
            .await
            .unwrap();
        let AcquireOutcome::Renewed(renewed) = again else {
            panic!("expected a renewal, got {again:?}");
        };
        assert_eq!(renewed.fencing_token, first.fencing_token);
        // The same, or (DynamoDB, whose renewal always changes the expiry:
        // DESIGN.md) a millisecond later.
        let later_by = renewed.expires_at.0 - first.expires_at.0;
        assert!(
            (0..=1).contains(&later_by),
            "limit {limit:?}: {later_by} ms"
        );
        if limit.get() == 2 {
            granted(
                store
                    .acquire_with_limit(&name, &b, lease(60), limit, ahead)
                    .await
                    .unwrap(),
            );
        }
        let rival = store
            .acquire_with_limit(
                &name,
                &owner("arn:c"),
                lease(60),
                limit,
                now.plus_seconds(65),
            )
            .await
            .unwrap();
        assert!(
            matches!(rival, AcquireOutcome::Held(_)),
            "limit {limit:?}: {rival:?}"
        );
    }
}

async fn a_semaphore_admits_limit_holders_each_with_its_own_token(store: AnyStore, _: &str) {
    let (name, now) = (lock("semaphore"), EpochMillis::now());
    let two = Limit::new("limit", 2).unwrap();
    let a = granted(
        store
            .acquire_with_limit(&name, &owner("arn:a"), lease(60), two, now)
            .await
            .unwrap(),
    );
    let b = granted(
        store
            .acquire_with_limit(&name, &owner("arn:b"), lease(60), two, now)
            .await
            .unwrap(),
    );
    assert!(b.fencing_token > a.fencing_token);
    let third = store
        .acquire_with_limit(&name, &owner("arn:c"), lease(60), two, now)
        .await
        .unwrap();
    let AcquireOutcome::Held(contention) = third else {
        panic!("expected contention, got {third:?}");
    };
    let mut holders: Vec<_> = contention
        .holders
        .iter()
        .map(|h| h.owner.as_str())
        .collect();
    holders.sort();
    assert_eq!(holders, ["arn:a", "arn:b"]);
    let released = store
        .release_with_limit(&name, &owner("arn:a"), two, now)
        .await
        .unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    let c = granted(
        store
            .acquire_with_limit(&name, &owner("arn:c"), lease(60), two, now)
            .await
            .unwrap(),
    );
    assert!(c.fencing_token > b.fencing_token);
}

async fn the_sweep_release_leaves_a_later_grant_of_the_same_owner(store: AnyStore, _: &str) {
    let (name, now) = (lock("sweep"), EpochMillis::now());
    let later = EpochMillis(now.0 + 10_000);
    granted(
        store
            .acquire(&name, &owner("arn:redriven"), lease(60), later)
            .await
            .unwrap(),
    );
    let swept = store
        .release_granted_before(&name, &owner("arn:redriven"), now, later)
        .await
        .unwrap();
    assert!(
        matches!(&swept, ReleaseOutcome::HeldByOther(h) if h.owner == "arn:redriven"),
        "{swept:?}"
    );
    let rival = store
        .acquire(&name, &owner("arn:x"), lease(60), later)
        .await
        .unwrap();
    assert!(
        matches!(rival, AcquireOutcome::Held(_)),
        "the later grant stays: {rival:?}"
    );
    let swept = store
        .release_granted_before(&name, &owner("arn:redriven"), later, later)
        .await
        .unwrap();
    assert_eq!(swept, ReleaseOutcome::Released);
}

async fn locks_held_by_finds_an_owners_locks_until_released(store: AnyStore, _: &str) {
    let now = EpochMillis::now();
    let me = Owner::new(unique("arn:owner")).unwrap();
    let (first, second) = (lock("held-1"), lock("held-2"));
    granted(store.acquire(&first, &me, lease(60), now).await.unwrap());
    let two = Limit::new("limit", 2).unwrap();
    granted(
        store
            .acquire_with_limit(&second, &me, lease(60), two, now)
            .await
            .unwrap(),
    );
    let mut held = store.locks_held_by(&me).await.unwrap();
    held.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(held, [first.clone(), second.clone()]);
    store.release(&first, &me, now).await.unwrap();
    store
        .release_with_limit(&second, &me, two, now)
        .await
        .unwrap();
    assert_eq!(store.locks_held_by(&me).await.unwrap(), []);
}

async fn any_name_the_contract_accepts_round_trips(store: AnyStore, _: &str) {
    let now = EpochMillis::now();
    let me = Owner::new(unique("arn:names")).unwrap();
    let name = LockName::new(format!("customer/42 ünï ✓ {}", unique("_x.y"))).unwrap();
    let grant = granted(store.acquire(&name, &me, lease(60), now).await.unwrap());
    assert_eq!(grant.lock_name, name);
    assert_eq!(
        store.locks_held_by(&me).await.unwrap(),
        std::slice::from_ref(&name)
    );
    // A name that differs only where the encoding escapes is another lock.
    let other = LockName::new(name.as_str().replace('/', "_2F")).unwrap();
    granted(
        store
            .acquire(&other, &owner("arn:b"), lease(60), now)
            .await
            .unwrap(),
    );
}

async fn a_mutex_holder_admits_no_permit_beside_it_and_permits_keep_out_a_mutex(
    store: AnyStore,
    _: &str,
) {
    let (name, now) = (lock("mixed"), EpochMillis::now());
    let three = Limit::new("limit", 3).unwrap();
    granted(
        store
            .acquire(&name, &owner("arn:mutex"), lease(60), now)
            .await
            .unwrap(),
    );
    let permit = store
        .acquire_with_limit(&name, &owner("arn:permit"), lease(60), three, now)
        .await
        .unwrap();
    assert!(matches!(permit, AcquireOutcome::Held(_)), "{permit:?}");
    store
        .release(&name, &owner("arn:mutex"), now)
        .await
        .unwrap();
    granted(
        store
            .acquire_with_limit(&name, &owner("arn:permit"), lease(60), three, now)
            .await
            .unwrap(),
    );
    let mutex = store
        .acquire(&name, &owner("arn:mutex"), lease(60), now)
        .await
        .unwrap();
    assert!(matches!(mutex, AcquireOutcome::Held(_)), "{mutex:?}");
}
