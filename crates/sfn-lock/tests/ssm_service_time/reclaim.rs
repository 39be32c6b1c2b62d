//! An SSM lock nobody changes is trimmed by the sweep to its newest
//! generation and `current` (review finding 4: an idle lock kept what was
//! superseded in the five minutes before its last change forever, and the
//! account's 10,000 parameters filled up), whoever holds it, late forks
//! below the chain included, and goes on as if never trimmed.

use super::common::fault_proxy::generation_create;
use super::common::ssm::{advance, held_proxy, last_names_under, serial, ssm_store_at};
use super::common::stores::{granted, lease, owner};
use super::common::unique;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::names::encode_name;
use sfn_lock::{AcquireOutcome, EpochMillis, LockName, LockStore, SsmStore};

/// Past the trim wait (seven minutes), in seconds.
const IDLE: u64 = 8 * 60;

async fn store_via(endpoint: &str, path: &str) -> SsmStore {
    let config = aws_sdk_ssm::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        .build();
    SsmStore::ssm(aws_sdk_ssm::Client::from_conf(config), path)
}

#[tokio::test]
async fn ssm_an_idle_lock_is_trimmed_to_its_newest_generation_and_used_again() {
    let _serial = serial().await;
    let path = format!("/sfn-lock-test/{}", unique("trim"));
    let store = ssm_store_at(&path).await;
    let folder = |name: &LockName| format!("{path}/{}", encode_name(name.as_str()));
    let idle = LockName::new("idle").unwrap();
    let held = LockName::new("held").unwrap();
    let busy = LockName::new("busy").unwrap();
    let now = EpochMillis::now();
    let first = granted(
        store
            .acquire(&idle, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    store.release(&idle, &owner("arn:a"), now).await.unwrap();
    // A writer that read generation 2 stalls; its create lands after the
    // chain's writers deleted 3: a fork below the chain, not answered for.
    let (url, stalled) = held_proxy(generation_create).await;
    let late = store_via(&url, &path).await;
    let writer = {
        let idle = idle.clone();
        tokio::spawn(async move { late.acquire(&idle, &owner("arn:w"), lease(60), now).await })
    };
    stalled.arrived().await;
    for _ in 0..6 {
        store
            .acquire(&idle, &owner("arn:b"), lease(60), now)
            .await
            .unwrap();
        store.release(&idle, &owner("arn:b"), now).await.unwrap();
    }
    // A holder whose lease ran out long ago, and one that renews.
    store
        .acquire(&held, &owner("arn:gone"), lease(1), now)
        .await
        .unwrap();
    store
        .release(&held, &owner("arn:nobody"), now)
        .await
        .unwrap();
    store
        .acquire(&busy, &owner("arn:c"), lease(86_400), now)
        .await
        .unwrap();
    store
        .acquire(&busy, &owner("arn:c"), lease(86_400), now)
        .await
        .unwrap();
    let nothing_yet = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        (nothing_yet.looked_at, nothing_yet.trimmed),
        (0, 0),
        "{nothing_yet:?}"
    );
    for _ in 0..2 {
        advance(IDLE);
        store
            .acquire(&idle, &owner("arn:b"), lease(60), now)
            .await
            .unwrap();
        store.release(&idle, &owner("arn:b"), now).await.unwrap();
    }
    let generation_3 = "00000000000000000003".to_string();
    assert!(!last_names_under(&folder(&idle))
        .await
        .contains(&generation_3));
    stalled.go();
    let answer = writer.await.unwrap();
    assert!(
        matches!(answer, Ok(AcquireOutcome::Granted(_))),
        "decided again, on the chain: {answer:?}"
    );
    store.release(&idle, &owner("arn:w"), now).await.unwrap();
    assert!(
        last_names_under(&folder(&idle))
            .await
            .contains(&generation_3),
        "the late create landed"
    );

    advance(IDLE);
    store
        .acquire(&busy, &owner("arn:c"), lease(86_400), now)
        .await
        .unwrap();
    let trimmed = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        (trimmed.trimmed, trimmed.failed),
        (2, 0),
        "idle and held, not busy: {trimmed:?}"
    );
    for name in [&idle, &held] {
        let left = last_names_under(&folder(name)).await;
        assert_eq!(left.len(), 2, "{name:?}: the newest and current: {left:?}");
        assert!(left.contains(&"current".to_string()), "{left:?}");
    }
    assert!(
        last_names_under(&folder(&busy)).await.len() > 2,
        "a lock in use keeps its chain"
    );
    let again = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        again.looked_at, 0,
        "a trimmed lock is passed over: {again:?}"
    );

    let back = granted(
        store
            .acquire(&idle, &owner("arn:d"), lease(60), now)
            .await
            .unwrap(),
    );
    assert!(
        back.fencing_token > first.fencing_token,
        "tokens rise across a trim"
    );
    let taken = store
        .acquire(&idle, &owner("arn:e"), lease(60), now)
        .await
        .unwrap();
    assert!(
        matches!(&taken, AcquireOutcome::Held(c) if c.holders[0].owner == "arn:d"),
        "{taken:?}"
    );
}
