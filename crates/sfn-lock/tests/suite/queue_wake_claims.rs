//! A pump that sends an owed wake-up again first claims the marker (DESIGN.md,
//! "Queue"). The claim is a write like any other: it may land and lose its
//! answer, and the SDK's retry then fails its condition. That failure must
//! read as this pump's own claim, not another's, or nobody sends the
//! wake-up until the next pump (explorer, DynamoDB seed 0x4a8beac4e04edc81).

use crate::common;

use std::sync::{Arc, Mutex};

use common::fault_proxy::{fault_proxy, Matcher};
use common::log_capture::Captured;
use common::lossy_proxy::store_via;
use common::sfn::owner_of;
use common::tokens::{is_open, mint, throttle_next_wakes, woken_with};
use sfn_lock::aws::config::{sdk_config, waker_client};
use sfn_lock::{AcquireOutcome, EpochMillis, Limit, LockStore, SfnWaker};

use crate::queue_faults::{
    full_at, held_by_a, lease, losing_answer_of, owner, queue, wake_markers,
};

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
    let captured = Captured::start();
    let c = lossy.acquire(&lock, &owner("c"), lease(60), now).await;
    assert!(matches!(c, Ok(AcquireOutcome::Held(_))), "{c:?}");
    // One decision, one line: the wake-up sent, saying the claim's answer
    // was lost (not a line for the claim and another for the send).
    let about_b: Vec<_> = captured
        .lines()
        .into_iter()
        .filter(|line| line["fields"]["owner"] == b_owner.as_str())
        .collect();
    assert_eq!(about_b.len(), 1, "{about_b:#?}");
    assert_eq!(
        about_b[0]["fields"]["claim_answer_lost"], true,
        "{about_b:#?}"
    );
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

/// The claim lands and renews B's handed grant; before the SDK's retry, the
/// grant has run out and C takes the lock (a mutex) or a permit. The retry's
/// failed condition returns the item as it is now: the marker still names
/// this claim, but the grant is no longer the one handed to B. Nobody may
/// be woken into it (a mutex: C's fencing token in B's answer), and the
/// pump must not fail on it (a permit: B holds none). Found by review.
#[tokio::test]
async fn a_claim_whose_grant_was_taken_over_before_its_retry_wakes_nobody() {
    for limit in [Limit::ONE, Limit::new("limit", 2).unwrap()] {
        let (store, lock, now) = full_at(limit, "claim-taken-over").await;
        // B queues with a 1 s lease; A's release hands to it, both wake-up
        // attempts throttled: B is owed one.
        let b_owner = owner(&common::unique("b"));
        let b = mint(b_owner.as_str());
        let queued = store
            .acquire_or_queue(&lock, &b_owner, lease(1), limit, &b.clone().into(), now)
            .await
            .unwrap();
        assert!(
            matches!(queued, AcquireOutcome::Queued { .. }),
            "{queued:?}"
        );
        throttle_next_wakes(b_owner.as_str(), 2);
        store
            .release_with_limit(&lock, &owner("a"), limit, now)
            .await
            .unwrap();
        assert_eq!(wake_markers(&lock).await, 1, "{limit:?}");
        // D's refused acquire pumps; its claim lands, the answer is lost,
        // and meanwhile, 10 s on, C takes what B's lapsed grant left.
        let (url, faults) = fault_proxy("AWS_ENDPOINT_URL_DYNAMODB", claim, &[(0, "")]).await;
        let waker = SfnWaker::new(waker_client(&sdk_config().await));
        let lossy = store_via(&url).await.with_waker(Arc::new(waker));
        let c_outcome = Arc::new(Mutex::new(None));
        let (taker, taken, seen) = (store.clone(), lock.clone(), c_outcome.clone());
        faults.before_losing_answer(async move {
            let later = EpochMillis(now.0 + 10_000);
            let c_owner = owner("c");
            let c = taker.acquire_with_limit(&taken, &c_owner, lease(60), limit, later);
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.await);
        });
        let d = lossy
            .acquire_with_limit(&lock, &owner("d"), lease(60), limit, now)
            .await;
        let c = c_outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
        assert!(
            matches!(c, Some(Ok(AcquireOutcome::Granted(_)))),
            "{limit:?}: C takes over: {c:?}"
        );
        assert!(matches!(d, Ok(AcquireOutcome::Held(_))), "{limit:?}: {d:?}");
        assert!(
            is_open(&b),
            "{limit:?}: B was woken into a grant it no longer has"
        );
        if limit.is_mutex() {
            assert_eq!(owner_of(lock.as_str()).await.as_deref(), Some("arn:exec:c"));
        }
        assert_eq!(
            wake_markers(&lock).await,
            0,
            "{limit:?}: the stale marker goes"
        );
    }
}
