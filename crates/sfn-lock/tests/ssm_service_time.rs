//! The SSM store judges time by SSM's own clock only (issue 23): old
//! generations go once superseded long enough by SSM's `LastModifiedDate`s,
//! a writer that stalled between its read and its create is not answered for,
//! a caller's clock deletes nothing, and a listing that contradicts the hint
//! decides nothing. SSM's clock is moved ahead on the local server; every
//! test here takes `serial()` first, and the file is a test binary of its
//! own: in the suite's binary the other SSM tests would run while SSM's
//! clock jumps.

#[path = "suite/common/mod.rs"]
mod common;

#[path = "ssm_service_time/bounds.rs"]
mod bounds;
#[path = "ssm_service_time/late_hint.rs"]
mod late_hint;
#[path = "ssm_service_time/reclaim.rs"]
mod reclaim;

use common::fault_proxy::{fault_proxy, generation_create};
use common::ssm::{advance, current_hint, generations, held_proxy, serial, ssm_store_via};
use common::stores::{granted, lease, lock, owner, store};
use sfn_lock::store::document::ssm::KEEP_SUPERSEDED_MILLIS;
use sfn_lock::{AcquireOutcome, EpochMillis, LockName, LockStore, StoreError};

/// Past the keep time, in seconds.
const KEEP: u64 = (KEEP_SUPERSEDED_MILLIS / 1000) as u64 + 60;

fn minutes(now: EpochMillis, minutes: i64) -> EpochMillis {
    EpochMillis(now.0 + minutes * 60_000)
}

/// Renews `who`'s grant once per step, SSM's clock `KEEP` further each time,
/// each at the matching caller time: old generations become deletable.
async fn renew_through_time(store: &impl LockStore, name: &LockName, who: &str, now: EpochMillis) {
    for step in 1..=3 {
        advance(KEEP);
        let at = minutes(now, 6 * step);
        let renewed = store.acquire(name, &owner(who), lease(3600), at).await;
        assert!(
            matches!(renewed, Ok(AcquireOutcome::Renewed(_))),
            "{renewed:?}"
        );
    }
}

#[tokio::test]
async fn ssm_deletes_generations_superseded_long_enough_ago_by_its_own_clock() {
    let _serial = serial().await;
    let store = store("ssm").await;
    let name = lock("generations");
    let now = EpochMillis::now();
    store
        .acquire(&name, &owner("arn:a"), lease(60), now)
        .await
        .unwrap();
    store.release(&name, &owner("arn:a"), now).await.unwrap();
    store
        .acquire(&name, &owner("arn:b"), lease(60), now)
        .await
        .unwrap();
    // Caller clocks far ahead delete nothing: only SSM's clock counts.
    store
        .release(&name, &owner("arn:b"), minutes(now, 60))
        .await
        .unwrap();
    store
        .acquire(&name, &owner("arn:c"), lease(60), minutes(now, 120))
        .await
        .unwrap();
    assert_eq!(
        generations(&name).await.len(),
        5,
        "nothing deleted by a caller's clock"
    );
    advance(KEEP);
    store.release(&name, &owner("arn:c"), now).await.unwrap();
    advance(KEEP);
    let token = granted(
        store
            .acquire(&name, &owner("arn:d"), lease(60), now)
            .await
            .unwrap(),
    )
    .fencing_token;
    assert_eq!(
        generations(&name).await.len(),
        7,
        "6 existed only since the last move"
    );
    advance(KEEP);
    store.release(&name, &owner("arn:d"), now).await.unwrap();
    let left = generations(&name).await;
    assert_eq!(left.len(), 3, "1 to 5 are gone: {left:?}");
    assert!(left[0].ends_with("6") && left[2].ends_with("8"), "{left:?}");
    assert!(token > 2, "the counter lives in the newest generation");
}

#[tokio::test]
async fn ssm_a_writer_stalled_between_read_and_create_is_not_answered_for() {
    // Review finding 1: a writer read generation 2, stalled; meanwhile the
    // chain moved on and 1 to 3 were deleted. Its late create of 3 landed,
    // and it answered granted while another held.
    let _serial = serial().await;
    let direct = store("ssm").await;
    let (url, held) = held_proxy(generation_create).await;
    let stalled = ssm_store_via(&url).await;
    let name = lock("stalled");
    let now = EpochMillis::now();
    direct
        .acquire(&name, &owner("arn:a"), lease(60), now)
        .await
        .unwrap();
    direct.release(&name, &owner("arn:a"), now).await.unwrap();
    let writer = {
        let name = name.clone();
        tokio::spawn(async move {
            stalled
                .acquire(&name, &owner("arn:w"), lease(60), now)
                .await
        })
    };
    held.arrived().await;
    granted(
        direct
            .acquire(&name, &owner("arn:b"), lease(3600), now)
            .await
            .unwrap(),
    );
    renew_through_time(&direct, &name, "arn:b", now).await;
    assert!(
        !generations(&name)
            .await
            .iter()
            .any(|g| g.ends_with("00003")),
        "generation 3 was deleted, so the stalled create can land"
    );
    held.go();
    let late = writer.await.unwrap();
    assert!(
        matches!(&late, Ok(AcquireOutcome::Held(c)) if c.holders[0].owner == "arn:b"),
        "a create long after its read is not answered for; deciding again finds B: {late:?}"
    );
    let view = direct.inspect(&name).await.unwrap();
    let owners: Vec<&str> = view.grants.iter().map(|g| g.owner.as_str()).collect();
    assert_eq!(owners, ["arn:b"]);
}

#[tokio::test]
async fn ssm_a_caller_clock_ahead_deletes_nothing_a_slower_writer_needs() {
    // Review finding 1, the clock: a writer whose clock ran ahead deleted the
    // generation a concurrent writer was about to create, by its own clock.
    let _serial = serial().await;
    let direct = store("ssm").await;
    let (url, held) = held_proxy(generation_create).await;
    let slower = ssm_store_via(&url).await;
    let name = lock("fast-clock");
    let now = EpochMillis::now();
    direct
        .acquire(&name, &owner("arn:a"), lease(60), now)
        .await
        .unwrap();
    direct.release(&name, &owner("arn:a"), now).await.unwrap();
    let writer = {
        let name = name.clone();
        tokio::spawn(async move { slower.acquire(&name, &owner("arn:w"), lease(60), now).await })
    };
    held.arrived().await;
    granted(
        direct
            .acquire(&name, &owner("arn:b"), lease(60), now)
            .await
            .unwrap(),
    );
    for step in 1..=3 {
        let ahead = minutes(now, 6 * step);
        direct
            .acquire(&name, &owner("arn:b"), lease(3600), ahead)
            .await
            .unwrap();
    }
    held.go();
    let answer = writer.await.unwrap();
    assert!(
        matches!(&answer, Ok(AcquireOutcome::Held(c)) if c.holders[0].owner == "arn:b"),
        "the create found generation 3 kept, and the lock held: {answer:?}"
    );
}

fn listing(head: &str, _: &[u8]) -> bool {
    head.contains("x-amz-target: amazonssm.getparametersbypath")
}

#[tokio::test]
async fn ssm_an_empty_listing_that_contradicts_the_hint_decides_nothing() {
    // Review finding 2: the hint's generation is gone (a hint written late,
    // by a writer that stalled after its create), the listing's page came
    // back empty (SSM documents zero items a page as possible), and the lock
    // looked never used: generation 1 was created again beside the chain.
    let _serial = serial().await;
    let direct = store("ssm").await;
    let name = lock("empty-listing");
    let now = EpochMillis::now();
    granted(
        direct
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    let first_hint = current_hint(&name, None).await.expect("a hint");
    // More generations than a probe's window (ten), all deleted below.
    for _ in 0..6 {
        direct.release(&name, &owner("arn:a"), now).await.unwrap();
        direct
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap();
    }
    direct.release(&name, &owner("arn:a"), now).await.unwrap();
    granted(
        direct
            .acquire(&name, &owner("arn:b"), lease(3600), now)
            .await
            .unwrap(),
    );
    renew_through_time(&direct, &name, "arn:b", now).await;
    let kept = generations(&name).await;
    assert!(
        kept.iter().all(|g| g.as_str() > "00000000000000000010"),
        "{kept:?}"
    );
    current_hint(&name, Some(Some(first_hint))).await;
    let (url, faults) = fault_proxy("AWS_ENDPOINT_URL_SSM", listing, &[(200, "EmptyPage")]).await;
    let misled = ssm_store_via(&url).await;
    let answer = misled.acquire(&name, &owner("arn:c"), lease(60), now).await;
    assert_eq!(faults.injected().len(), 1, "the listing was answered empty");
    assert!(
        matches!(answer, Err(StoreError::Unavailable(ref why)) if why.contains("hint")),
        "{answer:?}"
    );
    let again = direct.acquire(&name, &owner("arn:c"), lease(60), now).await;
    assert!(
        matches!(&again, Ok(AcquireOutcome::Held(c)) if c.holders[0].owner == "arn:b"),
        "a full listing finds the chain: {again:?}"
    );
}
