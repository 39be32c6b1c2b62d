//! Mutual exclusion under real contention, on every store: 16 contenders on
//! one lock name, 400 cycles in all on DynamoDB and 208 on S3 and on SSM
//! (each of their cycles costs three to four times the requests).
//!
//! The server is moto behind a one-request-at-a-time lock
//! (tests/support/dynamodb_server.py), for all three services. Stock moto
//! checks a condition and writes in separate steps without a lock, so two
//! conditional writes to one item (or object, or parameter name) can both
//! pass there; DynamoDB, S3 and SSM are atomic per key, and so is this server.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::stores::store;
use common::unique;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner, ReleaseOutcome,
};

const CONTENDERS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamodb_no_two_holders_ever_overlap_and_tokens_rise_in_grant_order() {
    contend(store("dynamodb").await, 25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_no_two_holders_ever_overlap_and_tokens_rise_in_grant_order() {
    contend(store("s3").await, 13).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ssm_no_two_holders_ever_overlap_and_tokens_rise_in_grant_order() {
    contend(store("ssm").await, 13).await;
}

/// `CONTENDERS` tasks, `cycles` grants each, on one lock.
async fn contend(store: AnyStore, cycles: usize) {
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
            for _ in 0..cycles {
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
    assert_eq!(grants.len(), CONTENDERS * cycles);
    assert!(
        grants.windows(2).all(|pair| pair[0] < pair[1]),
        "fencing tokens must strictly rise in grant order"
    );
    // The lock ends released: a newcomer gets it at once.
    let newcomer = Owner::new("arn:exec:newcomer").unwrap();
    let last = store
        .acquire(&lock, &newcomer, lease, EpochMillis::now())
        .await;
    assert!(matches!(last, Ok(AcquireOutcome::Granted(_))), "{last:?}");
}
