//! A pump that sends an owed wake-up again first claims the marker (DESIGN.md,
//! "Queue"). The claim is a write like any other: it may land and lose its
//! answer, and the SDK's retry then fails its condition. That failure must
//! read as this pump's own claim, not another's, or nobody sends the
//! wake-up until the next pump (explorer, DynamoDB seed 0x4a8beac4e04edc81).

use crate::common;

use common::fault_proxy::Matcher;
use common::sfn::owner_of;
use common::tokens::{is_open, throttle_next_wakes, woken_with};
use sfn_lock::{AcquireOutcome, Limit, LockStore};

use crate::queue_faults::{held_by_a, lease, losing_answer_of, owner, queue, wake_markers};

/// Requests to DynamoDB that claim an owed wake-up's marker.
fn claim(head: &str, body: &[u8]) -> bool {
    head.contains("x-amz-target: dynamodb_20120810.updateitem")
        && String::from_utf8_lossy(body).contains("#wake = :claimed")
}

#[tokio::test]
async fn a_claim_whose_answer_was_lost_still_sends_the_wake_up() {
    let matcher: Matcher = claim;
    let (store, lock, now) = held_by_a("lost-claim").await;
    let b_owner = owner(&common::unique("b"));
    let b = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    // A's release hands the lock to B; both attempts of its wake-up are
    // throttled, so the marker says B is owed one.
    throttle_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert!(is_open(&b));
    assert_eq!(wake_markers(&lock).await, 1, "the hand-off is unconfirmed");
    // The next pump (a polling acquire, refused) claims the marker; the
    // claim lands, its answer is lost, the SDK's retry finds it moved on.
    let lossy = losing_answer_of(matcher).await;
    let c = lossy.acquire(&lock, &owner("c"), lease(60), now).await;
    assert!(matches!(c, Ok(AcquireOutcome::Held(_))), "{c:?}");
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    assert!(
        !is_open(&b),
        "the pump whose claim landed sends the wake-up"
    );
    assert_eq!(woken_with(&b)["owner"], b_owner.as_str());
    assert_eq!(wake_markers(&lock).await, 0, "the wake-up was confirmed");
}
