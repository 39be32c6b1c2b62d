//! Mutual exclusion under real contention: 16 contenders, 25 cycles each, on
//! one lock name, against the local server.
//!
//! The server is moto behind a one-request-at-a-time lock
//! (tests/support/dynamodb_server.py). Stock moto checks a condition and
//! writes in separate steps without a lock, so two conditional writes to one
//! item can both pass there; DynamoDB is atomic per item, and so is this server.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{client, counted_store, get_item, unique};
use sfn_lock::{
    AcquireOutcome, EpochMillis, LeaseSeconds, LockName, LockStore, Owner, ReleaseOutcome,
};

const CONTENDERS: usize = 16;
const CYCLES: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_two_holders_ever_overlap_and_tokens_rise_in_grant_order() {
    let (store, _) = counted_store().await;
    let store = Arc::new(store);
    let lock = LockName::new(unique("contended-mutex")).unwrap();
    // A lease far longer than the test: every hand-over must be a release, never an expiry.
    let lease = LeaseSeconds::new("leaseSeconds", 600).unwrap();
    let in_critical_section = Arc::new(AtomicBool::new(false));
    let grants: Arc<Mutex<Vec<u64>>> = Arc::default();

    let mut contenders = Vec::new();
    for contender in 0..CONTENDERS {
        let (store, lock) = (store.clone(), lock.clone());
        let (in_critical_section, grants) = (in_critical_section.clone(), grants.clone());
        contenders.push(tokio::spawn(async move {
            let owner = Owner::new(format!("arn:exec:contender-{contender}")).unwrap();
            let mut contended = 0_u32;
            for _ in 0..CYCLES {
                let token = loop {
                    match store
                        .acquire(&lock, &owner, lease, EpochMillis::now())
                        .await
                        .unwrap()
                    {
                        AcquireOutcome::Granted(lease) => break lease.fencing_token,
                        other @ (AcquireOutcome::Renewed(_) | AcquireOutcome::Queued { .. }) => {
                            panic!("nobody holds across cycles, nobody queues: {other:?}")
                        }
                        AcquireOutcome::Held(_) => {
                            // A jittered wait of about one queue's length (15 waiters, one
                            // hand-over each) keeps the waiters from flooding the
                            // one-at-a-time server. It orders nobody, so it hides no race.
                            contended = contended
                                .wrapping_mul(1_103_515_245)
                                .wrapping_add(12_345 + contender as u32);
                            let jitter = u64::from(contended >> 16) % 300;
                            tokio::time::sleep(Duration::from_millis(150 + jitter)).await;
                        }
                    }
                };
                let overlapped = in_critical_section.swap(true, Ordering::SeqCst);
                assert!(
                    !overlapped,
                    "two holders inside the critical section at once"
                );
                grants.lock().unwrap().push(token);
                // The critical section lasts from the grant's answer until just
                // before the release is sent (no later: once it is sent, a
                // correct lock may grant the next holder before our answer
                // returns). It takes real time, so a second grant that a broken
                // condition lets through lands inside it instead of in a gap of
                // a few yields. The pause is the work's length; it orders nobody.
                tokio::time::sleep(Duration::from_millis(5)).await;
                in_critical_section.store(false, Ordering::SeqCst);
                let released = store
                    .release(&lock, &owner, EpochMillis::now())
                    .await
                    .unwrap();
                assert_eq!(released, ReleaseOutcome::Released);
            }
        }));
    }
    // Bounded: a broken release (the lock never freed) fails the test instead
    // of hanging it. Far above the normal run (20 to 40 s on the serialised moto).
    let all = async {
        for contender in contenders {
            contender
                .await
                .expect("contender finished without a failed assertion");
        }
    };
    tokio::time::timeout(Duration::from_secs(600), all)
        .await
        .expect("all contenders finished within 10 minutes: is the lock ever released?");

    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), CONTENDERS * CYCLES);
    assert!(
        grants.windows(2).all(|pair| pair[0] < pair[1]),
        "fencing tokens must strictly rise in grant order"
    );
    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("lock item");
    assert!(
        !item.contains_key("owner"),
        "the lock ends released: {item:?}"
    );
}
