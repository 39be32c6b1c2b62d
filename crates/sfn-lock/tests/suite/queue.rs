//! The fair queue against the real server and the local Step Functions
//! endpoint: waiters are handed the lock in order, by the release, and a
//! waiter whose task ended is skipped. The clock is passed in; nothing sleeps.

use crate::common;

use common::sfn::owner_of;
use common::tokens::{
    close, fail_next_wakes, is_open, lose_next_wake_answer, mint, queued_store, woken_with,
};
use common::{client, get_item, unique};
use sfn_lock::store::dynamodb::queue::QUEUE_LENGTH;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, Lease, LeaseSeconds, Limit, LockName, LockStore,
    Owner, ReleaseOutcome, StoreError, TaskToken,
};

fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

fn limit(n: i64) -> Limit {
    Limit::new("limit", n).unwrap()
}

fn owner(name: &str) -> Owner {
    Owner::new(format!("arn:exec:{name}")).unwrap()
}

fn lock(prefix: &str) -> LockName {
    LockName::new(unique(prefix)).unwrap()
}

async fn queue(
    store: &DynamoStore,
    lock: &LockName,
    who: &Owner,
    limit: Limit,
    now: EpochMillis,
) -> (TaskToken, AcquireOutcome) {
    let token = mint(who.as_str());
    let outcome = store
        .acquire_or_queue(lock, who, lease(60), limit, &token.clone().into(), now)
        .await
        .expect("a queued acquire");
    (token, outcome)
}

/// A store that wakes waiters, a fresh lock held by A (60 s), and the clock.
async fn held_by_a(prefix: &str) -> (DynamoStore, LockName, EpochMillis) {
    let (store, lock, now) = (queued_store().await, lock(prefix), EpochMillis::now());
    granted(
        store
            .acquire(&lock, &owner("a"), lease(60), now)
            .await
            .unwrap(),
    );
    (store, lock, now)
}

fn granted(outcome: AcquireOutcome) -> Lease {
    match outcome {
        AcquireOutcome::Granted(lease) => lease,
        other => panic!("expected a grant, got {other:?}"),
    }
}

async fn queue_length(lock: &LockName) -> i64 {
    get_item(&client().await, lock.as_str())
        .await
        .and_then(|item| item.get(QUEUE_LENGTH)?.as_n().ok()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_free_lock_is_granted_and_the_task_woken_at_once() {
    let (store, lock) = (queued_store().await, lock("queue-free"));
    let (token, outcome) = queue(&store, &lock, &owner("a"), Limit::ONE, EpochMillis::now()).await;
    let lease = granted(outcome);
    let output = woken_with(&token);
    assert_eq!(output["fencingToken"], lease.fencing_token);
    assert_eq!(output["outcome"], "granted");
    assert_eq!(output["owner"], "arn:exec:a");
    assert_eq!(queue_length(&lock).await, 0);
}

#[tokio::test]
async fn waiters_get_the_lock_in_the_order_they_queued_each_from_a_release() {
    let (store, lock) = (queued_store().await, lock("queue-fifo"));
    let now = EpochMillis::now();
    let first = granted(
        store
            .acquire(&lock, &owner("a"), lease(60), now)
            .await
            .unwrap(),
    );
    let mut waiters = Vec::new();
    for (index, name) in ["b", "c", "d"].into_iter().enumerate() {
        let (token, outcome) = queue(&store, &lock, &owner(name), Limit::ONE, now).await;
        assert_eq!(
            outcome,
            AcquireOutcome::Queued {
                position: index as u32 + 1
            }
        );
        assert!(is_open(&token), "a queued waiter sleeps");
        waiters.push((owner(name), token));
    }
    let mut previous = (owner("a"), first.fencing_token);
    for (index, (who, token)) in waiters.iter().enumerate() {
        let released = store.release(&lock, &previous.0, now).await.unwrap();
        assert_eq!(released, ReleaseOutcome::Released);
        let output = woken_with(token);
        assert_eq!(owner_of(lock.as_str()).await.as_deref(), Some(who.as_str()));
        let token_now = output["fencingToken"].as_u64().unwrap();
        assert!(token_now > previous.1, "each hand-off is a new grant");
        for (_, later) in &waiters[index + 1..] {
            assert!(is_open(later), "only the oldest waiter is woken");
        }
        previous = (who.clone(), token_now);
    }
    store.release(&lock, &previous.0, now).await.unwrap();
    assert_eq!(owner_of(lock.as_str()).await, None);
    assert_eq!(queue_length(&lock).await, 0);
}

#[tokio::test]
async fn a_retried_queued_acquire_keeps_one_place_and_is_woken_on_its_newest_token() {
    let (store, lock, now) = held_by_a("queue-retry").await;
    let (old_token, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    let (new_token, again) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    assert_eq!(again, AcquireOutcome::Queued { position: 1 });
    assert_eq!(queue_length(&lock).await, 1, "one place per owner");
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(woken_with(&new_token)["owner"], "arn:exec:b");
    assert!(
        is_open(&old_token),
        "the failed attempt's token is not used"
    );
}

#[tokio::test]
async fn a_waiter_whose_task_ended_is_skipped_and_the_next_one_woken() {
    let (store, lock, now) = held_by_a("queue-dead").await;
    let (dead, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    let (live, _) = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    close(&dead, "stopped");
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(woken_with(&live)["owner"], "arn:exec:c");
    assert_eq!(owner_of(lock.as_str()).await.as_deref(), Some("arn:exec:c"));
    let dead_release = store.release(&lock, &owner("b"), now).await.unwrap();
    assert!(
        matches!(
            dead_release,
            ReleaseOutcome::HeldByOther(_) | ReleaseOutcome::NotHeld
        ),
        "the skipped waiter holds nothing: {dead_release:?}"
    );
}

#[tokio::test]
async fn a_waiter_that_gave_up_leaves_the_queue_and_is_never_handed_the_lock() {
    let (store, lock, now) = held_by_a("queue-gave-up").await;
    let (token, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    // Its wait ran out: the queued workflow's Catch releases.
    close(&token, "timed_out");
    let left = store.release(&lock, &owner("b"), now).await.unwrap();
    assert!(matches!(left, ReleaseOutcome::HeldByOther(_)), "{left:?}");
    assert_eq!(queue_length(&lock).await, 0);
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(
        owner_of(lock.as_str()).await,
        None,
        "nobody was handed the lock"
    );
}

#[tokio::test]
async fn a_new_acquire_does_not_overtake_a_waiter_and_hands_an_expired_lock_to_it() {
    let (store, lock) = (queued_store().await, lock("queue-no-barging"));
    let now = EpochMillis::now();
    store
        .acquire(&lock, &owner("a"), lease(10), now)
        .await
        .unwrap();
    let (token, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    // A's lease has run out; C (no queue) comes along.
    let later = EpochMillis(now.0 + 11_000);
    let outcome = store
        .acquire(&lock, &owner("c"), lease(60), later)
        .await
        .unwrap();
    match outcome {
        AcquireOutcome::Held(contention) => assert_eq!(contention.holders[0].owner, "arn:exec:b"),
        other => panic!("C must not overtake B: {other:?}"),
    }
    assert_eq!(woken_with(&token)["owner"], "arn:exec:b");
}

#[tokio::test]
async fn a_semaphore_hands_each_freed_permit_to_the_next_waiter() {
    let (store, lock) = (queued_store().await, lock("queue-semaphore"));
    let (two, now) = (limit(2), EpochMillis::now());
    for name in ["a", "b"] {
        granted(
            store
                .acquire_with_limit(&lock, &owner(name), lease(60), two, now)
                .await
                .unwrap(),
        );
    }
    let (c, queued_c) = queue(&store, &lock, &owner("c"), two, now).await;
    let (d, queued_d) = queue(&store, &lock, &owner("d"), two, now).await;
    assert_eq!(
        (queued_c, queued_d),
        (
            AcquireOutcome::Queued { position: 1 },
            AcquireOutcome::Queued { position: 2 }
        )
    );
    store
        .release_with_limit(&lock, &owner("a"), two, now)
        .await
        .unwrap();
    assert_eq!(woken_with(&c)["limit"], 2);
    assert!(is_open(&d));
    store
        .release_with_limit(&lock, &owner("b"), two, now)
        .await
        .unwrap();
    assert_eq!(woken_with(&d)["owner"], "arn:exec:d");
}

#[tokio::test]
async fn a_release_cut_short_before_its_hand_off_is_finished_by_its_retry() {
    let (store, lock, now) = held_by_a("queue-retried-release").await;
    let (token, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    // The first release frees the lock and stops there (a store that
    // cannot wake anyone, as a function that died after its write).
    let unwoken = DynamoStore::new(client().await, common::table_name());
    unwoken.release(&lock, &owner("a"), now).await.unwrap();
    assert!(is_open(&token));
    // Step Functions retries the release: not held any more, but it hands off.
    let retried = store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(retried, ReleaseOutcome::NotHeld);
    assert_eq!(woken_with(&token)["owner"], "arn:exec:b");
}

#[tokio::test]
async fn a_hand_off_whose_wake_failed_stays_with_the_waiter_until_its_catch_releases() {
    let (store, lock, now) = held_by_a("queue-lost-wake").await;
    // An owner of its own: the injected fault is for its tokens alone.
    let b_owner = owner(&unique("b"));
    let (b, _) = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    let (c, _) = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    // Every attempt of the wake-up fails: none is known to have landed.
    fail_next_wakes(b_owner.as_str(), 2);
    store.release(&lock, &owner("a"), now).await.unwrap();
    // B may or may not run: the grant stays with it, nobody else gets in.
    assert!(is_open(&b));
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    // B's wait times out; its Catch releases, and C is next.
    close(&b, "timed_out");
    assert_eq!(
        store.release(&lock, &b_owner, now).await.unwrap(),
        ReleaseOutcome::Released
    );
    assert_eq!(woken_with(&c)["owner"], "arn:exec:c");
}

#[tokio::test]
async fn a_wake_up_that_failed_once_is_repeated() {
    let (store, lock, now) = held_by_a("queue-wake-retried").await;
    let b_owner = owner(&unique("b"));
    let (b, _) = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    fail_next_wakes(b_owner.as_str(), 1);
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(woken_with(&b)["owner"], b_owner.as_str());
}

#[tokio::test]
async fn a_renewal_whose_task_was_already_woken_keeps_the_grant() {
    let (store, lock, now) = held_by_a("queue-renew-woken").await;
    let (token, _) = queue(&store, &lock, &owner("b"), Limit::ONE, now).await;
    store.release(&lock, &owner("a"), now).await.unwrap();
    woken_with(&token);
    // The same acquire again (a duplicate invocation): the task is completed.
    let again = store
        .acquire_or_queue(
            &lock,
            &owner("b"),
            lease(60),
            Limit::ONE,
            &token.clone().into(),
            now,
        )
        .await;
    assert!(
        matches!(again, Err(StoreError::Refused { ref field, .. }) if field == "taskToken"),
        "{again:?}"
    );
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some("arn:exec:b"),
        "B runs: its grant stays"
    );
}

#[tokio::test]
async fn a_grant_to_a_task_that_had_ended_is_taken_back_at_once() {
    let (store, lock) = (queued_store().await, lock("queue-granted-dead"));
    let token = mint("arn:exec:a");
    close(&token, "stopped");
    let answer = store
        .acquire_or_queue(
            &lock,
            &owner("a"),
            lease(60),
            Limit::ONE,
            &token.clone().into(),
            EpochMillis::now(),
        )
        .await;
    assert!(
        matches!(answer, Err(StoreError::Refused { ref field, .. }) if field == "taskToken"),
        "{answer:?}"
    );
    assert_eq!(owner_of(lock.as_str()).await, None, "nobody runs under it");
}

#[tokio::test]
async fn the_sweep_finds_and_removes_an_ended_waiters_place() {
    let (store, lock, now) = held_by_a("queue-swept").await;
    // An owner of its own: the owner index is shared with the other tests.
    let b_owner = owner(&unique("b"));
    let (b, _) = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    let (c, _) = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    assert_eq!(
        store.locks_held_by(&b_owner).await.unwrap(),
        vec![lock.clone()]
    );
    close(&b, "stopped");
    let ended = EpochMillis(now.0 + 1);
    store
        .release_granted_before(&lock, &b_owner, ended, ended)
        .await
        .unwrap();
    assert_eq!(queue_length(&lock).await, 1, "B's place is gone, C's stays");
    store.release(&lock, &owner("a"), now).await.unwrap();
    assert_eq!(woken_with(&c)["owner"], "arn:exec:c");
}

#[tokio::test]
async fn a_hand_off_to_an_ended_waiter_that_could_not_be_told_apart_is_swept() {
    let (store, lock, now) = held_by_a("queue-ended-handed").await;
    let b_owner = owner(&unique("b"));
    let (b, _) = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    let (c, _) = queue(&store, &lock, &owner("c"), Limit::ONE, now).await;
    // B's execution is stopped while it waits; its place stays until the sweep.
    close(&b, "stopped");
    let ended = EpochMillis::now();
    // A later release hands the lock to B, and the wake-up's fate is unknown
    // (no answer twice): the grant stays, B's execution runs no Catch.
    fail_next_wakes(b_owner.as_str(), 2);
    let later = EpochMillis(ended.0 + 60_000);
    store.release(&lock, &owner("a"), later).await.unwrap();
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str())
    );
    // The sweep for B's end: the grant answers a request B made before it ended.
    let swept = store
        .release_granted_before(&lock, &b_owner, ended, later)
        .await
        .unwrap();
    assert_eq!(swept, ReleaseOutcome::Released);
    assert_eq!(woken_with(&c)["owner"], "arn:exec:c");
}

#[tokio::test]
async fn an_older_attempt_still_running_cannot_put_back_its_dead_token() {
    let (store, lock, now) = held_by_a("queue-stale-attempt").await;
    // Attempt 1 began first; Lambda reported it failed while it still ran,
    // and attempt 2 (a new token) queued. Then attempt 1's write arrives.
    let (older, newer) = (mint("arn:exec:b"), mint("arn:exec:b"));
    let later = EpochMillis(now.0 + 2_000);
    store
        .acquire_or_queue(
            &lock,
            &owner("b"),
            lease(60),
            Limit::ONE,
            &newer.clone().into(),
            later,
        )
        .await
        .unwrap();
    let stale = store
        .acquire_or_queue(
            &lock,
            &owner("b"),
            lease(60),
            Limit::ONE,
            &older.clone().into(),
            now,
        )
        .await;
    // Retryable, in case it was the newest after all; an older attempt's
    // task is closed, so its error goes nowhere.
    assert!(
        matches!(stale, Err(StoreError::Unavailable(_))),
        "{stale:?}"
    );
    store.release(&lock, &owner("a"), later).await.unwrap();
    assert_eq!(woken_with(&newer)["owner"], "arn:exec:b");
    assert!(is_open(&older));
}

/// Found in review (issue 24): a later pump's claim of an owed wake-up moves `expiresAt` to its
/// own `now + waiter lease`, unconditionally: it cuts short a lease the
/// holder renewed (and was told) since.
#[tokio::test]
async fn a_claim_of_an_owed_wake_up_never_shortens_a_renewed_lease() {
    let (store, lock, now) = held_by_a("queue-claim-shortens").await;
    let b_owner = owner(&unique("b"));
    let (first, _) = queue(&store, &lock, &b_owner, Limit::ONE, now).await;
    // The hand-off's wake-up lands but its answer is lost; the repeat hears
    // "closed": unknown, so the marker stays owed although B is awake.
    lose_next_wake_answer(b_owner.as_str());
    store.release(&lock, &owner("a"), now).await.unwrap();
    let output = woken_with(&first);
    assert_eq!(output["owner"], b_owner.as_str());
    // B's workload renews with a longer lease (docs/modes.md, "The workload's lock: fencing token and renewal").
    let long = store
        .acquire(&lock, &b_owner, lease(600), now.plus_seconds(40))
        .await
        .unwrap();
    let AcquireOutcome::Renewed(told) = long else {
        panic!("{long:?}")
    };
    assert_eq!(told.expires_at, now.plus_seconds(640));
    // A rival's refused acquire pumps: it claims the owed marker and re-sends.
    let rival = store
        .acquire(&lock, &owner("c"), lease(60), now.plus_seconds(50))
        .await
        .unwrap();
    assert!(matches!(rival, AcquireOutcome::Held(_)), "{rival:?}");
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    let expires: i64 = item["expiresAt"].as_n().unwrap().parse().unwrap();
    assert_eq!(
        expires,
        now.plus_seconds(640).0,
        "B was told +640 s; the claim moved it to +{} s",
        (expires - now.0) / 1000
    );
    let later = store
        .acquire(&lock, &owner("d"), lease(60), now.plus_seconds(200))
        .await
        .unwrap();
    assert!(
        matches!(later, AcquireOutcome::Held(_)),
        "a rival got in while B holds until +640 s: {later:?}"
    );
}

/// Found in review (issue 24): a hand-off's take-back pins "its own grant, unrenewed" by the
/// handed `expiresAt`; a renewal that now writes nothing (the lease already
/// lasts as long) leaves it pinned, so the pump takes back a grant the
/// waiter's retried acquire answered `renewed` and woke its new task with.
#[derive(Debug)]
struct RetryRacesTheWake {
    inner: sfn_lock::SfnWaker,
    retry: std::sync::Mutex<Option<(LockName, Owner, TaskToken, EpochMillis)>>,
    answer: std::sync::Mutex<Option<AcquireOutcome>>,
}

impl sfn_lock::Wake for RetryRacesTheWake {
    fn wake<'a>(&'a self, token: &'a str, output: String) -> sfn_lock::ports::wake::WakeFuture<'a> {
        Box::pin(async move {
            let retry = self.retry.lock().unwrap().take();
            if let Some((lock, who, second, at)) = retry {
                // Step Functions retried B's acquire (new token) while the
                // release was handing it the lock; its first token is closed.
                let other = queued_store().await;
                let answer = other
                    .acquire_or_queue(&lock, &who, lease(60), Limit::ONE, &second.into(), at)
                    .await
                    .unwrap();
                *self.answer.lock().unwrap() = Some(answer);
            }
            self.inner.wake(token, output).await
        })
    }
}

#[tokio::test]
async fn a_hand_off_never_takes_back_a_grant_the_waiters_retry_renewed() {
    let (_, lock, now) = held_by_a("queue-take-back-renewed").await;
    let b_owner = owner(&unique("b"));
    let plain = queued_store().await;
    let (first, _) = queue(&plain, &lock, &b_owner, Limit::ONE, now).await;
    // B's first attempt failed (a Lambda service error): its token is closed,
    // and the retry (started a moment before the hand-off) has a new one.
    close(&first, "timed_out");
    let second = mint(b_owner.as_str());
    let racer = std::sync::Arc::new(RetryRacesTheWake {
        inner: sfn_lock::SfnWaker::new(sfn_lock::aws::config::waker_client(
            &sfn_lock::aws::config::sdk_config().await,
        )),
        retry: std::sync::Mutex::new(Some((
            lock.clone(),
            b_owner.clone(),
            second.clone(),
            now.plus_seconds(9),
        ))),
        answer: std::sync::Mutex::new(None),
    });
    let releaser = DynamoStore::new(client().await, common::table_name()).with_waker(racer.clone());
    releaser
        .release(&lock, &owner("a"), now.plus_seconds(10))
        .await
        .unwrap();
    let answer = racer.answer.lock().unwrap().take().expect("the retry ran");
    assert!(matches!(answer, AcquireOutcome::Renewed(_)), "{answer:?}");
    let output = woken_with(&second);
    assert_eq!(output["outcome"], "renewed");
    assert_eq!(
        owner_of(lock.as_str()).await.as_deref(),
        Some(b_owner.as_str()),
        "B's retry answered renewed and woke its task, so B runs: its grant must stay"
    );
}
