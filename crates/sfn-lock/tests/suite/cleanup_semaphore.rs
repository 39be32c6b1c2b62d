//! The sweep frees every semaphore permit an ended execution holds (found
//! through their markers), beside its mutex locks, and leaves the other
//! holders' permits alone. DynamoDB, Step Functions and SQS served by moto.

use crate::common;

use common::sfn::{hold, owner_of, queue, start, stop, sweeper, LOCKED};
use common::{client, get_item, sqs_batch, status_change, unique};
use sfn_lock::store::dynamodb::permits::{marker_key, permit_names, HOLDER_COUNT};
use sfn_lock::{AcquireOutcome, EpochMillis, LeaseSeconds, Limit, LockName, LockStore, Owner};

const GRACE: u32 = 60;

async fn hold_permit(store: &impl LockStore, lock: &str, owner: &str, limit: i64) {
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

async fn has_permit(lock: &str, owner: &str) -> bool {
    let item = get_item(&client().await, lock).await.expect("lock item");
    item.contains_key(&permit_names(owner).0)
}

#[tokio::test]
async fn an_aborted_execution_loses_its_permits_and_its_locks_the_others_keep_theirs() {
    let queue_url = queue().await;
    let sweeper = sweeper(GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("sem-aborted")).await;
    let bystander = start(LOCKED, &unique("sem-running")).await;
    let (pool_a, pool_b, mutex) = (unique("pool-a"), unique("pool-b"), unique("mutex"));
    hold_permit(&sweeper.store, &pool_a, &ended, 3).await;
    hold_permit(&sweeper.store, &pool_a, &bystander, 3).await;
    hold_permit(&sweeper.store, &pool_b, &ended, 2).await;
    hold(&sweeper.store, &mutex, &ended).await;
    let stopped_at = stop(&ended).await;

    let event = sqs_batch(&[status_change(&ended, "ABORTED")]);
    let report = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    let mut released: Vec<_> = report
        .released
        .iter()
        .map(|lock| lock.lock_name.clone())
        .collect();
    released.sort();
    let mut expected = vec![pool_a.clone(), pool_b.clone(), mutex.clone()];
    expected.sort();
    assert_eq!(released, expected);

    assert!(!has_permit(&pool_a, &ended).await);
    assert!(
        has_permit(&pool_a, &bystander).await,
        "another holder's permit stays"
    );
    assert!(!has_permit(&pool_b, &ended).await);
    let pool_a_item = get_item(&client().await, &pool_a).await.unwrap();
    assert_eq!(pool_a_item[HOLDER_COUNT].as_n().unwrap(), "1");
    assert_eq!(owner_of(&mutex).await, None);
    let marker = marker_key(
        &LockName::new(pool_a.clone()).unwrap(),
        &Owner::new(ended.clone()).unwrap(),
    );
    assert!(
        get_item(&client().await, &marker).await.is_none(),
        "its marker is gone"
    );

    // Delivered again: nothing left to free.
    let again = sweeper
        .sweep(&event, stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    assert!(again.released.is_empty(), "{again:?}");
    assert!(has_permit(&pool_a, &bystander).await);
}

/// A renewal never shortens a permit (DESIGN.md), so a short renewal of a
/// long permit must not let TTL take the marker the sweep finds it by while
/// the permit lives (found in review, issue 24).
#[tokio::test]
async fn a_short_renewal_of_a_long_permit_keeps_its_marker_as_long_as_the_permit() {
    let store = sfn_lock::DynamoStore::new(client().await, common::table_name());
    let (lock, holder) = (
        LockName::new(unique("pool-long")).unwrap(),
        Owner::new(unique("arn:exec:long")).unwrap(),
    );
    let (two, now) = (Limit::new("limit", 2).unwrap(), EpochMillis::now());
    let long = LeaseSeconds::new("leaseSeconds", 3 * 86_400).unwrap();
    let short = LeaseSeconds::new("leaseSeconds", 60).unwrap();
    store
        .acquire_with_limit(&lock, &holder, long, two, now)
        .await
        .unwrap();
    let renewed = store
        .acquire_with_limit(&lock, &holder, short, two, now)
        .await
        .unwrap();
    let AcquireOutcome::Renewed(renewed) = renewed else {
        panic!("expected a renewal, got {renewed:?}");
    };
    assert!(renewed.expires_at >= now.plus_seconds(3 * 86_400));
    let marker = get_item(&client().await, &marker_key(&lock, &holder))
        .await
        .expect("the permit's marker");
    let ttl: i64 = marker["ttl"].as_n().unwrap().parse().unwrap();
    assert!(
        ttl >= renewed.expires_at.0 / 1000,
        "marker TTL {ttl} before the permit's expiry {:?}",
        renewed.expires_at
    );
}
