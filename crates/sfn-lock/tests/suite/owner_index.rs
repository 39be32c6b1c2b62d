//! `locks_held_by`: the sweep's question "which locks does this execution
//! still hold?", answered from the sparse owner index, page by page.

use crate::common;

use common::{counted_store, unique};
use sfn_lock::store::dynamodb::OWNER_QUERY_PAGE_SIZE;
use sfn_lock::{AcquireOutcome, EpochMillis, LeaseSeconds, LockName, LockStore, Owner};

fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

async fn grant(store: &impl LockStore, lock: &LockName, owner: &Owner) {
    match store
        .acquire(lock, owner, lease(60), EpochMillis::now())
        .await
    {
        Ok(AcquireOutcome::Granted(_)) => {}
        other => panic!("expected a grant of {lock:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn locks_held_by_finds_every_lock_of_one_owner_only() {
    let (store, _) = counted_store().await;
    let owner = Owner::new(unique("arn:exec:many")).unwrap();
    let other = Owner::new(unique("arn:exec:other")).unwrap();
    let mut mine = Vec::new();
    for i in 0..3 {
        let lock = LockName::new(unique(&format!("held-{i}"))).unwrap();
        grant(&store, &lock, &owner).await;
        mine.push(lock);
    }
    grant(&store, &LockName::new(unique("theirs")).unwrap(), &other).await;
    store
        .release(&mine[2], &owner, EpochMillis::now())
        .await
        .unwrap();

    let mut found = store.locks_held_by(&owner).await.unwrap();
    found.sort();
    let mut expected = mine[..2].to_vec();
    expected.sort();
    assert_eq!(found, expected);
}

#[tokio::test]
async fn locks_held_by_reads_every_page() {
    let (store, requests) = counted_store().await;
    let owner = Owner::new(unique("arn:exec:hoarder")).unwrap();
    let held = 2 * OWNER_QUERY_PAGE_SIZE + 1;
    let mut mine = Vec::new();
    for i in 0..held {
        let lock = LockName::new(unique(&format!("page-{i}"))).unwrap();
        grant(&store, &lock, &owner).await;
        mine.push(lock);
    }
    requests.take();

    let mut found = store.locks_held_by(&owner).await.unwrap();

    assert_eq!(requests.take(), 3, "three pages, one Query each");
    found.sort();
    mine.sort();
    assert_eq!(found, mine);
}
