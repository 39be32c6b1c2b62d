//! The fair queue under lost answers and refused wake-ups (issue 22): every
//! hand-off is recognisable when repeated, a wake-up that may not have
//! reached its waiter is sent again by the next pump, and none of it fails a
//! release or takes a grant from a waiter that may run. Real server, local
//! Step Functions endpoint, the clock passed in.

use crate::common;

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use common::fault_proxy::fault_proxy;
use common::log_capture::Captured;
use common::lossy_proxy::store_via;
use common::sfn::owner_of;
use common::tokens::{
    close, fail_next_wakes, is_open, mint, queued_store, throttle_next_wakes, woken_with,
};
use common::{client, counted_store, get_item, unique};
use sfn_lock::aws::config::{sdk_config, waker_client};
use sfn_lock::store::dynamodb::queue::{wake_name, QUEUE_LENGTH, WAKE_PREFIX};
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, Limit, LockName, LockStore, Owner,
    ReleaseOutcome, SfnWaker, TaskToken, WaitBound, Waiting,
};

pub(crate) fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

pub(crate) fn owner(name: &str) -> Owner {
    Owner::new(format!("arn:exec:{name}")).unwrap()
}

pub(crate) async fn queue(
    store: &DynamoStore,
    lock: &LockName,
    who: &Owner,
    limit: Limit,
    now: EpochMillis,
) -> TaskToken {
    let token = mint(who.as_str());
    let outcome = store
        .acquire_or_queue(lock, who, lease(60), limit, &token.clone().into(), now)
        .await
        .expect("a queued acquire");
    assert!(
        matches!(outcome, AcquireOutcome::Queued { .. }),
        "{outcome:?}"
    );
    token
}

/// Requests to DynamoDB that carry a hand-off (it alone writes a wake marker).
fn hand_off(head: &str, body: &[u8]) -> bool {
    head.contains("x-amz-target: dynamodb_20120810.updateitem")
        && String::from_utf8_lossy(body).contains("#wake = :wake")
}

/// Requests to DynamoDB that take a handed grant back.
fn take_back(head: &str, body: &[u8]) -> bool {
    head.contains("x-amz-target: dynamodb_20120810.updateitem")
        && String::from_utf8_lossy(body).contains("REMOVE #wake, ")
}

/// A store whose first request `matcher` picks lands and loses its answer
/// (the SDK retries it), and that wakes waiters.
pub(crate) async fn losing_answer_of(matcher: common::fault_proxy::Matcher) -> DynamoStore {
    let (url, _) = fault_proxy("AWS_ENDPOINT_URL_DYNAMODB", matcher, &[(0, "")]).await;
    let waker = SfnWaker::new(waker_client(&sdk_config().await));
    store_via(&url).await.with_waker(Arc::new(waker))
}

async fn item_attribute(lock: &LockName, name: &str) -> Option<String> {
    let item = get_item(&client().await, lock.as_str()).await?;
    let value = item.get(name)?;
    value
        .as_s()
        .ok()
        .cloned()
        .or_else(|| value.as_n().ok().cloned())
}

pub(crate) async fn wake_markers(lock: &LockName) -> usize {
    get_item(&client().await, lock.as_str())
        .await
        .map_or(0, |item| {
            item.keys().filter(|k| k.starts_with(WAKE_PREFIX)).count()
        })
}

/// A store that wakes waiters, a fresh lock held by A (60 s), and the clock.
pub(crate) async fn held_by_a(prefix: &str) -> (DynamoStore, LockName, EpochMillis) {
    let (store, lock, now) = (
        queued_store().await,
        LockName::new(unique(prefix)).unwrap(),
        EpochMillis::now(),
    );
    let granted = store.acquire(&lock, &owner("a"), lease(60), now).await;
    assert!(
        matches!(granted, Ok(AcquireOutcome::Granted(_))),
        "{granted:?}"
    );
    (store, lock, now)
}

/// A lock full at `limit` (held by A; with two permits, by A and X), the
/// store, and the clock.
pub(crate) async fn full_at(limit: Limit, prefix: &str) -> (DynamoStore, LockName, EpochMillis) {
    let (store, lock, now) = held_by_a(prefix).await;
    if !limit.is_mutex() {
        // Two permits: A's mutex grant first gives way to a permit.
        store.release(&lock, &owner("a"), now).await.unwrap();
        for who in ["a", "x"] {
            let who = owner(who);
            let got = store.acquire_with_limit(&lock, &who, lease(60), limit, now);
            assert!(matches!(got.await, Ok(AcquireOutcome::Granted(_))));
        }
    }
    (store, lock, now)
}

#[tokio::test]
async fn a_hand_off_whose_answer_was_lost_still_wakes_its_waiter() {
    for limit in [Limit::ONE, Limit::new("limit", 2).unwrap()] {
        let (store, lock, now) = full_at(limit, "lost-hand-off").await;
        let b = queue(&store, &lock, &owner("b"), limit, now).await;
        // The release's hand-off lands; its answer is lost and the SDK's
        // retry finds the place gone. The marker says the hand-off was ours.
        let lossy = losing_answer_of(hand_off).await;
        let released = lossy
            .release_with_limit(&lock, &owner("a"), limit, now)
            .await;
        assert_eq!(released.unwrap(), ReleaseOutcome::Released, "{limit:?}");
        assert_eq!(woken_with(&b)["owner"], "arn:exec:b", "{limit:?}");
        assert_eq!(wake_markers(&lock).await, 0, "the wake-up was confirmed");
    }
}

#[tokio::test]
async fn an_acquire_that_hands_the_lock_to_itself_and_loses_the_answer_is_woken() {
    let (store, lock) = (
        queued_store().await,
        LockName::new(unique("lost-self")).unwrap(),
    );
    let now = EpochMillis::now();
    let a = store.acquire(&lock, &owner("a"), lease(1), now).await;
    assert!(matches!(a, Ok(AcquireOutcome::Granted(_))));
    queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    // A's lease ran out; B's task is retried (a new token) and its acquire
    // hands the room owed to the queue to B itself, losing that answer.
    let later = EpochMillis(now.0 + 5_000);
    let retried = mint("arn:exec:b");
    let lossy = losing_answer_of(hand_off).await;
    let waiting = Waiting::from(retried.clone());
    let outcome = lossy
        .acquire_or_queue(&lock, &owner("b"), lease(60), Limit::ONE, &waiting, later)
        .await;
    assert!(
        matches!(outcome, Ok(AcquireOutcome::Granted(_))),
        "{outcome:?}"
    );
    assert_eq!(woken_with(&retried)["owner"], "arn:exec:b");
    assert_eq!(owner_of(lock.as_str()).await.as_deref(), Some("arn:exec:b"));
    assert_eq!(
        item_attribute(&lock, QUEUE_LENGTH).await.as_deref(),
        Some("0")
    );
}

#[tokio::test]
async fn a_take_back_keeps_the_real_release_record() {
    let (store, lock, now) = held_by_a("take-back-record").await;
    let dead = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    let c = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    close(&dead, "timed_out");
    // A's release hands to B, whose task has ended: taken back (its answer
    // lost, too), then C is woken.
    let lossy = losing_answer_of(take_back).await;
    let captured = Captured::start();
    let released = lossy.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert_eq!(woken_with(&c)["owner"], "arn:exec:c");
    // One line for B: its grant taken back. The retry that finds its own
    // write landed must not add that the grant "stays".
    let about_b: Vec<_> = captured
        .lines()
        .into_iter()
        .filter(|line| line["fields"]["owner"] == "arn:exec:b")
        .collect();
    assert_eq!(about_b.len(), 1, "{about_b:#?}");
    // The record is A's release's, so that A's retried release (Step
    // Functions', with a new id) knows the lock went on after its own.
    assert_eq!(
        item_attribute(&lock, "releasedBy").await.as_deref(),
        Some("arn:exec:a")
    );
}

#[tokio::test]
async fn a_wake_up_whose_fate_is_unknown_is_sent_again_by_the_next_pump() {
    let (store, lock, now) = held_by_a("unknown-wake").await;
    let b_owner = owner(&unique("b"));
    let b = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    // Both attempts answer 500: it may or may not have taken.
    fail_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert!(is_open(&b));
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    assert_eq!(wake_markers(&lock).await, 1, "the hand-off is unconfirmed");
    // Any later pump sends it again: here a polling acquire that is refused.
    let c = store.acquire(&lock, &owner("c"), lease(60), now).await;
    assert!(matches!(c, Ok(AcquireOutcome::Held(_))), "{c:?}");
    assert_eq!(woken_with(&b)["owner"], b_owner.as_str());
    assert_eq!(wake_markers(&lock).await, 0);
}

#[tokio::test]
async fn a_throttled_wake_up_fails_no_release_and_is_sent_again() {
    let (store, lock, now) = held_by_a("throttled-wake").await;
    let b_owner = owner(&unique("b"));
    let b = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    let c = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    throttle_next_wakes(b_owner.as_str(), 2);
    // The release did its part: the grant is B's, its wake-up owed.
    let first = store.release(&lock, &owner("a"), now).await;
    assert_eq!(first.unwrap(), ReleaseOutcome::Released);
    assert!(is_open(&b));
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    // A skip-if-running run on the same lock is refused, never failed, and
    // its pass over the queue wakes B.
    let skip = store.acquire(&lock, &owner("skip"), lease(60), now).await;
    assert!(matches!(skip, Ok(AcquireOutcome::Held(_))), "{skip:?}");
    assert_eq!(woken_with(&b)["owner"], b_owner.as_str());
    assert!(is_open(&c), "C still waits for B");
}

#[tokio::test]
async fn a_re_sent_wake_up_that_finds_the_task_closed_leaves_the_grant() {
    let (store, lock, now) = held_by_a("resend-closed").await;
    let b_owner = owner(&unique("b"));
    let b = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    fail_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    // Closed now: woken by the first attempt after all, or dead. Nobody
    // can tell, so the grant stays; the waiter's Catch or the sweep frees it.
    close(&b, "timed_out");
    let c = store.acquire(&lock, &owner("c"), lease(60), now).await;
    assert!(matches!(c, Ok(AcquireOutcome::Held(_))), "{c:?}");
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    assert_eq!(wake_markers(&lock).await, 0, "nothing more to send");
}

#[tokio::test]
async fn a_woken_waiters_item_goes_and_a_waiting_one_expires_with_its_bound() {
    let (store, lock, now) = held_by_a("waiter-items").await;
    let b = owner(&unique("b"));
    let token = mint(b.as_str());
    let wait = WaitBound {
        started_at: now,
        max_wait_seconds: 600,
    };
    let waiting = Waiting {
        token: token.clone(),
        wait: Some(wait),
    };
    store
        .acquire_or_queue(&lock, &b, lease(60), Limit::ONE, &waiting, now)
        .await
        .unwrap();
    let key = waiter_key(&lock, b.as_str()).await;
    let item = get_item(&client().await, &key)
        .await
        .expect("the waiter item");
    let ttl: i64 = item["ttl"].as_n().unwrap().parse().unwrap();
    // The wait bound, then the lease, then TTL's day of grace: no year.
    let expected = (now.0 + (600 + 60 + 86_400) * 1000 + 999) / 1000;
    assert!(
        (expected - 1..=expected + 1).contains(&ttl),
        "{ttl} vs {expected}"
    );
    store.release(&lock, &owner("a"), now).await.unwrap();
    woken_with(&token);
    assert!(
        get_item(&client().await, &key).await.is_none(),
        "deleted once woken"
    );
}

/// The key of `owner`'s waiter item on `lock`, found through the owner index
/// the sweep uses.
async fn waiter_key(lock: &LockName, owner: &str) -> String {
    let page = client()
        .await
        .query()
        .table_name(common::table_name())
        .index_name("owner-index")
        .key_condition_expression("#o = :o")
        .expression_attribute_names("#o", "owner")
        .expression_attribute_values(
            ":o",
            aws_sdk_dynamodb::types::AttributeValue::S(owner.to_owned()),
        )
        .send()
        .await
        .unwrap();
    page.items()
        .iter()
        .filter_map(|item| item.get("lockName")?.as_s().ok().cloned())
        .find(|key| key.starts_with('\u{1}') && key.contains("waiter"))
        .unwrap_or_else(|| panic!("no waiter item of {owner} on {lock:?}"))
}

#[tokio::test]
async fn the_sweep_reads_before_it_writes() {
    let (store, lock, now) = held_by_a("sweep-reads").await;
    let (counted, requests) = counted_store().await;
    requests.take();
    // An ended execution that holds nothing on this lock (a waiter woken and
    // gone, a lock it released): one read, no write on the lock's item.
    let swept = counted
        .release_granted_before(&lock, &owner("gone"), now, now)
        .await
        .unwrap();
    assert_eq!(swept, ReleaseOutcome::NotHeld);
    assert_eq!(requests.take(), 1, "one GetItem");
    drop(store);
}

#[tokio::test]
async fn a_wake_up_sent_late_hands_a_fresh_lease() {
    let (store, lock, now) = held_by_a("late-wake").await;
    let b_owner = owner(&unique("b"));
    let b = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    throttle_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    // The reconciler comes a minute later, past the lease as first handed.
    let later = EpochMillis(now.0 + 61_000);
    assert!(
        store.wake_queue(&lock, later).await.unwrap(),
        "it had a wake-up to send"
    );
    let woken = woken_with(&b);
    let expires_at = woken["expiresAt"].as_str().unwrap();
    let expires_at = EpochMillis::parse_rfc3339(expires_at).unwrap();
    assert!(
        expires_at.0 >= later.0 + 60_000,
        "a whole lease from the re-send"
    );
    // And the lock is B's for that lease: a new acquire is refused.
    let next = EpochMillis(later.0 + 1_000);
    let c = store.acquire(&lock, &owner("c"), lease(60), next).await;
    assert!(matches!(c, Ok(AcquireOutcome::Held(_))), "{c:?}");
}

#[tokio::test]
async fn an_owners_next_grant_or_release_takes_its_stale_wake_marker() {
    let (store, lock, now) = held_by_a("stale-marker").await;
    let b_owner = owner(&unique("b"));
    queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    throttle_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(wake_markers(&lock).await, 1);
    // B's grant is freed without a wake-up (a forced release by a CLI,
    // which has no Step Functions client): its marker goes with it.
    let unwoken = DynamoStore::new(client().await, common::table_name());
    let freed = unwoken.release(&lock, &b_owner, now).await.unwrap();
    assert_eq!(freed, ReleaseOutcome::Released);
    assert_eq!(wake_markers(&lock).await, 0, "the release took the marker");
    // A stale marker a release did not take (written by an older version)
    // goes with B's next grant, so no later pump wakes that grant's task.
    client()
        .await
        .update_item()
        .table_name(common::table_name())
        .key("lockName", AttributeValue::S(lock.as_str().to_owned()))
        .update_expression("SET #w = :v")
        .expression_attribute_names("#w", wake_name(&lock, &b_owner))
        .expression_attribute_values(":v", AttributeValue::S("1/0/stale".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(wake_markers(&lock).await, 1);
    let again = store.acquire(&lock, &b_owner, lease(60), now).await;
    assert!(matches!(again, Ok(AcquireOutcome::Granted(_))), "{again:?}");
    assert_eq!(
        wake_markers(&lock).await,
        0,
        "the grant took the stale marker"
    );
}

#[tokio::test]
async fn a_healthy_queue_is_none_of_the_reconcilers_business() {
    let (store, lock, now) = held_by_a("healthy-queue").await;
    let b = queue(&store, &lock, &owner(&unique("b")), Limit::ONE, now).await;
    // A live holder keeps B waiting, as it should: not listed, nothing done.
    let listed = store.queues_to_wake(100_000, now).await.unwrap();
    assert!(!listed.contains(&lock), "{listed:?}");
    assert!(!store.wake_queue(&lock, now).await.unwrap());
    assert!(is_open(&b));
    // Once A's lease has run out with nobody to hand the lock on, it is.
    let later = EpochMillis(now.0 + 61_000);
    let listed = store.queues_to_wake(100_000, later).await.unwrap();
    assert!(listed.contains(&lock), "{listed:?}");
    assert!(store.wake_queue(&lock, later).await.unwrap());
    woken_with(&b);
}
