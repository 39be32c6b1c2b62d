//! The sweep on every store: an execution that ended without releasing loses
//! its mutex lock and its semaphore permit once the grace has passed (found
//! through its owner markers), a running execution keeps its permit, and a
//! second delivery of the event frees nothing. Step Functions, SQS and the
//! three stores served by moto.

use crate::common;
use crate::for_every_store;

use common::sfn::{queue, start, stop, sweeper_on, LOCKED};
use common::{sqs_batch, status_change, unique};
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, LeaseSeconds, Limit, LockName, LockStore, Owner,
};

const GRACE: u32 = 60;

async fn hold(store: &AnyStore, lock: &str, owner: &str, limit: i64) {
    let outcome = store
        .acquire_with_limit(
            &LockName::new(lock).unwrap(),
            &Owner::new(owner).unwrap(),
            LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
            Limit::new("limit", limit).unwrap(),
            EpochMillis::now(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

/// The holders `lock` names when a newcomer asks with `limit`.
async fn holders(store: &AnyStore, lock: &str, limit: i64) -> Vec<String> {
    let outcome = store
        .acquire_with_limit(
            &LockName::new(lock).unwrap(),
            &Owner::new(unique("arn:probe")).unwrap(),
            LeaseSeconds::new("leaseSeconds", 1).unwrap(),
            Limit::new("limit", limit).unwrap(),
            EpochMillis::now(),
        )
        .await
        .unwrap();
    match outcome {
        AcquireOutcome::Held(contention) => {
            contention.holders.into_iter().map(|h| h.owner).collect()
        }
        other => panic!("expected the lock full, got {other:?}"),
    }
}

for_every_store!(an_ended_execution_loses_its_locks_and_permits_a_running_one_keeps_its);

async fn an_ended_execution_loses_its_locks_and_permits_a_running_one_keeps_its(
    store: AnyStore,
    kind: &str,
) {
    let queue_url = queue().await;
    let sweeper = sweeper_on(store, GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique(&format!("{kind}-aborted"))).await;
    let running = start(LOCKED, &unique(&format!("{kind}-running"))).await;
    let (mutex, pool) = (unique("swept-mutex"), unique("swept-pool"));
    hold(&sweeper.store, &mutex, &ended, 1).await;
    hold(&sweeper.store, &pool, &ended, 2).await;
    hold(&sweeper.store, &pool, &running, 2).await;
    let stopped_at = stop(&ended).await;

    let event = sqs_batch(&[status_change(&ended, "ABORTED")]);
    let report = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    let mut released: Vec<_> = report
        .released
        .iter()
        .map(|l| l.lock_name.clone())
        .collect();
    released.sort();
    let mut expected = vec![mutex.clone(), pool.clone()];
    expected.sort();
    assert_eq!(released, expected, "{kind}");

    // The mutex is free; the pool keeps the running execution's permit only.
    hold(&sweeper.store, &mutex, "arn:next", 1).await;
    hold(&sweeper.store, &pool, "arn:next", 2).await;
    let mut left = holders(&sweeper.store, &pool, 2).await;
    left.sort();
    let mut want = vec!["arn:next".to_string(), running.clone()];
    want.sort();
    assert_eq!(left, want, "{kind}");
    let owner = Owner::new(ended.clone()).unwrap();
    assert_eq!(
        sweeper.store.locks_held_by(&owner).await.unwrap(),
        [],
        "{kind}: markers gone"
    );

    let again = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    assert!(again.released.is_empty(), "{kind}: {again:?}");
}
