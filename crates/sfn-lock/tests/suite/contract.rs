//! The lock's contract, one rule per test, held against every store
//! (DynamoDB, S3, SSM) on the local server: each rule below runs once per
//! store (`rule::dynamodb`, `rule::s3`, `rule::ssm`). The clock is passed in,
//! so expiry is tested without sleeping.

use crate::common;
use crate::for_every_store;

use common::stores::{granted, lease, lock, owner};
use sfn_lock::{AcquireOutcome, AnyStore, EpochMillis, LockStore, ReleaseOutcome};

for_every_store!(
    a_free_lock_is_granted_until_its_lease_ends,
    contention_names_the_live_holder_and_its_expiry,
    the_owner_acquiring_again_renews_with_the_same_token,
    an_expired_lease_is_taken_over_with_a_higher_token,
    an_owner_whose_lease_ran_out_gets_a_new_token_not_a_renewal,
    only_the_owner_releases_and_a_stale_owner_learns_who_holds_it,
    a_second_release_answers_not_held,
    fencing_tokens_rise_across_release_and_takeover,
);

async fn a_free_lock_is_granted_until_its_lease_ends(store: AnyStore, _: &str) {
    let (name, now) = (lock("fresh"), EpochMillis::now());
    let lease = granted(
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    assert_eq!(lease.owner, owner("arn:a"));
    assert_eq!(lease.lock_name, name);
    assert_eq!(lease.acquired_at, now);
    assert_eq!(lease.expires_at, now.plus_seconds(60));
    assert!(lease.fencing_token > 0);
}

async fn contention_names_the_live_holder_and_its_expiry(store: AnyStore, _: &str) {
    let (name, now) = (lock("contended"), EpochMillis::now());
    let held = granted(
        store
            .acquire(&name, &owner("arn:holder"), lease(60), now)
            .await
            .unwrap(),
    );
    let refused = store
        .acquire(
            &name,
            &owner("arn:rival"),
            lease(60),
            EpochMillis(now.0 + 1),
        )
        .await
        .unwrap();
    let AcquireOutcome::Held(contention) = refused else {
        panic!("expected contention, got {refused:?}");
    };
    assert_eq!(contention.limit.get(), 1);
    assert_eq!(contention.holders.len(), 1);
    assert_eq!(contention.holders[0].owner, "arn:holder");
    assert_eq!(contention.holders[0].fencing_token, held.fencing_token);
    assert_eq!(contention.holders[0].expires_at, held.expires_at);
}

async fn the_owner_acquiring_again_renews_with_the_same_token(store: AnyStore, _: &str) {
    let (name, now) = (lock("renew"), EpochMillis::now());
    let first = granted(
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    let later = EpochMillis(now.0 + 30_000);
    let again = store
        .acquire(&name, &owner("arn:a"), lease(60), later)
        .await
        .unwrap();
    let AcquireOutcome::Renewed(renewed) = again else {
        panic!("expected a renewal, got {again:?}");
    };
    assert_eq!(renewed.fencing_token, first.fencing_token);
    assert_eq!(renewed.acquired_at, first.acquired_at);
    assert_eq!(renewed.expires_at, later.plus_seconds(60));
    // The renewal holds: a rival is refused until the new expiry.
    let rival = store
        .acquire(
            &name,
            &owner("arn:b"),
            lease(60),
            EpochMillis(now.0 + 61_000),
        )
        .await
        .unwrap();
    assert!(matches!(rival, AcquireOutcome::Held(_)), "{rival:?}");
}

async fn an_expired_lease_is_taken_over_with_a_higher_token(store: AnyStore, _: &str) {
    let (name, now) = (lock("takeover"), EpochMillis::now());
    let old = granted(
        store
            .acquire(&name, &owner("arn:old"), lease(1), now)
            .await
            .unwrap(),
    );
    let after = EpochMillis(old.expires_at.0 + 1);
    let new = granted(
        store
            .acquire(&name, &owner("arn:new"), lease(60), after)
            .await
            .unwrap(),
    );
    assert!(new.fencing_token > old.fencing_token);
    // At the very instant of expiry the lease still counts (expiresAt < now frees it).
    let name2 = lock("takeover-edge");
    let held = granted(
        store
            .acquire(&name2, &owner("arn:old"), lease(1), now)
            .await
            .unwrap(),
    );
    let edge = store
        .acquire(&name2, &owner("arn:new"), lease(60), held.expires_at)
        .await
        .unwrap();
    assert!(matches!(edge, AcquireOutcome::Held(_)), "{edge:?}");
}

async fn an_owner_whose_lease_ran_out_gets_a_new_token_not_a_renewal(store: AnyStore, _: &str) {
    let (name, now) = (lock("lapsed"), EpochMillis::now());
    let first = granted(
        store
            .acquire(&name, &owner("arn:a"), lease(1), now)
            .await
            .unwrap(),
    );
    let after = EpochMillis(first.expires_at.0 + 1);
    let again = granted(
        store
            .acquire(&name, &owner("arn:a"), lease(60), after)
            .await
            .unwrap(),
    );
    assert!(again.fencing_token > first.fencing_token);
    assert_eq!(again.acquired_at, after);
}

async fn only_the_owner_releases_and_a_stale_owner_learns_who_holds_it(store: AnyStore, _: &str) {
    let (name, now) = (lock("stale"), EpochMillis::now());
    let old = granted(
        store
            .acquire(&name, &owner("arn:old"), lease(1), now)
            .await
            .unwrap(),
    );
    let after = EpochMillis(old.expires_at.0 + 1);
    let new = granted(
        store
            .acquire(&name, &owner("arn:new"), lease(60), after)
            .await
            .unwrap(),
    );
    let stale = store
        .release(&name, &owner("arn:old"), after)
        .await
        .unwrap();
    let ReleaseOutcome::HeldByOther(holder) = stale else {
        panic!("expected held_by_other, got {stale:?}");
    };
    assert_eq!(holder.owner, "arn:new");
    assert_eq!(holder.fencing_token, new.fencing_token);
    // The new holder's lock stands.
    let rival = store
        .acquire(&name, &owner("arn:x"), lease(60), after)
        .await
        .unwrap();
    assert!(matches!(rival, AcquireOutcome::Held(_)), "{rival:?}");
    let released = store
        .release(&name, &owner("arn:new"), after)
        .await
        .unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
}

async fn a_second_release_answers_not_held(store: AnyStore, _: &str) {
    let (name, now) = (lock("twice"), EpochMillis::now());
    granted(
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    assert_eq!(
        store.release(&name, &owner("arn:a"), now).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(
        store.release(&name, &owner("arn:a"), now).await.unwrap(),
        ReleaseOutcome::NotHeld
    );
    assert_eq!(
        store
            .release(&lock("never"), &owner("arn:a"), now)
            .await
            .unwrap(),
        ReleaseOutcome::NotHeld
    );
    // Free again: anyone may take it.
    granted(
        store
            .acquire(&name, &owner("arn:b"), lease(60), now)
            .await
            .unwrap(),
    );
}

async fn fencing_tokens_rise_across_release_and_takeover(store: AnyStore, _: &str) {
    let (name, now) = (lock("tokens"), EpochMillis::now());
    let mut tokens = Vec::new();
    let first = granted(
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    tokens.push(first.fencing_token);
    store.release(&name, &owner("arn:a"), now).await.unwrap();
    let second = granted(
        store
            .acquire(&name, &owner("arn:b"), lease(1), now)
            .await
            .unwrap(),
    );
    tokens.push(second.fencing_token);
    let after = EpochMillis(second.expires_at.0 + 1);
    tokens.push(
        granted(
            store
                .acquire(&name, &owner("arn:c"), lease(60), after)
                .await
                .unwrap(),
        )
        .fencing_token,
    );
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
}
