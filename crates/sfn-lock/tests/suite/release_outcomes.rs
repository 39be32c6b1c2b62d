//! What `release-lock` answers when its own release had already landed, and
//! when it did not: `held_by_other` means an overlap happened (operators alarm
//! on it), so a release that worked must never answer it. Against the real
//! server; lost answers come from a proxy that drops exactly one.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::lossy_proxy::{losing_first_answer, store_via};
use common::{client, counted_store, get_item, table_name, unique};
use serde_json::{json, Value};
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, Lease, LeaseSeconds, LockName, LockStore, Locker,
    Owner,
};
use tokio::sync::oneshot;

fn lease(seconds: i64) -> LeaseSeconds {
    LeaseSeconds::new("leaseSeconds", seconds).unwrap()
}

fn owner(name: &str) -> Owner {
    Owner::new(name).unwrap()
}

async fn direct() -> DynamoStore {
    counted_store().await.0
}

async fn grant(
    store: &DynamoStore,
    lock: &LockName,
    who: &Owner,
    seconds: i64,
    now: EpochMillis,
) -> Lease {
    match store.acquire(lock, who, lease(seconds), now).await.unwrap() {
        AcquireOutcome::Granted(lease) => lease,
        other => panic!("expected a new grant, got {other:?}"),
    }
}

/// `release-lock`'s event, as the shipped ASL sends it (no token) or with the token.
fn event(lock: &LockName, who: &Owner, fencing_token: Option<u64>) -> Value {
    let mut event = json!({"lockName": lock.as_str(), "owner": who.as_str()});
    if let Some(token) = fencing_token {
        event["fencingToken"] = json!(token);
    }
    event
}

async fn release_outcome(store: DynamoStore, event: &Value, now: EpochMillis) -> &'static str {
    Locker::new(store, lease(60))
        .release(event, now)
        .await
        .unwrap()
        .outcome
        .as_str()
}

async fn owner_of(lock: &LockName) -> Option<String> {
    let item = get_item(&client().await, lock.as_str())
        .await
        .expect("lock item");
    item.get("owner")
        .and_then(|value| value.as_s().ok())
        .cloned()
}

#[tokio::test]
async fn a_release_whose_answer_was_lost_answers_released() {
    let store = direct().await;
    let (lock, me) = (
        LockName::new(unique("lost-release")).unwrap(),
        owner("arn:exec:me"),
    );
    let now = EpochMillis::now();
    grant(&store, &lock, &me, 60, now).await;
    let (proxy, lost) = losing_first_answer(async {}).await;

    let outcome = release_outcome(store_via(&proxy).await, &event(&lock, &me, None), now).await;

    lost.await
        .expect("the proxy lost the first answer, so the SDK retried");
    assert_eq!(
        outcome, "released",
        "the retry found the caller's own release"
    );
    assert_eq!(owner_of(&lock).await, None);
}

#[tokio::test]
async fn a_lost_release_answer_stays_released_when_another_owner_got_in_before_the_retry() {
    let store = direct().await;
    let lock = LockName::new(unique("lost-release-overtaken")).unwrap();
    let (me, next) = (owner("arn:exec:me"), owner("arn:exec:next"));
    let now = EpochMillis::now();
    grant(&store, &lock, &me, 60, now).await;
    let (got_in, next_outcome) = oneshot::channel();
    let meanwhile = {
        let (store, lock, next) = (store.clone(), lock.clone(), next.clone());
        async move {
            let outcome = store
                .acquire(&lock, &next, lease(60), EpochMillis::now())
                .await;
            let _ = got_in.send(outcome);
        }
    };
    let (proxy, lost) = losing_first_answer(meanwhile).await;

    let outcome = release_outcome(store_via(&proxy).await, &event(&lock, &me, None), now).await;

    lost.await
        .expect("the proxy lost the first answer, so the SDK retried");
    let next_outcome = next_outcome
        .await
        .expect("the other owner tried in between");
    assert!(
        matches!(next_outcome, Ok(AcquireOutcome::Granted(_))),
        "the first attempt had freed the lock: {next_outcome:?}"
    );
    assert_eq!(outcome, "released", "no overlap happened");
    assert_eq!(owner_of(&lock).await.as_deref(), Some("arn:exec:next"));
}

#[tokio::test]
async fn a_lost_release_answer_never_frees_a_grant_its_owner_took_before_the_retry() {
    // The same owner took the lock again between the landed first attempt and
    // the retry: the retry must not free that newer grant.
    let store = direct().await;
    let (lock, me) = (
        LockName::new(unique("lost-release-regranted")).unwrap(),
        owner("arn:exec:me"),
    );
    let now = EpochMillis::now();
    grant(&store, &lock, &me, 60, now).await;
    let (regranted, my_new_grant) = oneshot::channel();
    let meanwhile = {
        let (store, lock, me) = (store.clone(), lock.clone(), me.clone());
        async move {
            let outcome = store
                .acquire(&lock, &me, lease(60), EpochMillis::now())
                .await;
            let _ = regranted.send(outcome);
        }
    };
    let (proxy, lost) = losing_first_answer(meanwhile).await;

    let outcome = release_outcome(store_via(&proxy).await, &event(&lock, &me, None), now).await;

    lost.await
        .expect("the proxy lost the first answer, so the SDK retried");
    let newer = match my_new_grant.await.expect("the owner acquired in between") {
        Ok(AcquireOutcome::Granted(lease)) => lease,
        other => panic!("the first attempt had freed the lock: {other:?}"),
    };
    assert_eq!(outcome, "released");
    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(item.get("owner"), Some(&AttributeValue::S(me.to_string())));
    assert_eq!(
        item.get("fencingToken"),
        Some(&AttributeValue::N(newer.fencing_token.to_string()))
    );
}

#[tokio::test]
async fn a_genuine_takeover_answers_held_by_other_with_or_without_the_token() {
    let store = direct().await;
    let lock = LockName::new(unique("takeover")).unwrap();
    let (slow, next) = (owner("arn:exec:slow"), owner("arn:exec:next"));
    let now = EpochMillis::now();
    let mine = grant(&store, &lock, &slow, 1, now).await;
    grant(&store, &lock, &next, 60, now.plus_seconds(2)).await;

    for token in [None, Some(mine.fencing_token)] {
        let outcome = release_outcome(
            store.clone(),
            &event(&lock, &slow, token),
            now.plus_seconds(3),
        )
        .await;
        assert_eq!(outcome, "held_by_other", "token {token:?}");
    }
    assert_eq!(owner_of(&lock).await.as_deref(), Some("arn:exec:next"));
}

#[tokio::test]
async fn a_release_retried_by_the_state_machine_after_another_owner_got_in_answers_released() {
    // The release-lock invocation failed after its write landed (e.g. the
    // SDK's operation timeout), so Step Functions invokes it again: a new call.
    let store = direct().await;
    let lock = LockName::new(unique("retried-invocation")).unwrap();
    let (me, next) = (owner("arn:exec:me"), owner("arn:exec:next"));
    let now = EpochMillis::now();
    let mine = grant(&store, &lock, &me, 60, now).await;
    assert_eq!(
        release_outcome(store.clone(), &event(&lock, &me, None), now).await,
        "released"
    );
    grant(&store, &lock, &next, 60, now).await;

    for token in [None, Some(mine.fencing_token)] {
        let outcome = release_outcome(store.clone(), &event(&lock, &me, token), now).await;
        assert_eq!(outcome, "released", "token {token:?}");
    }
    assert_eq!(owner_of(&lock).await.as_deref(), Some("arn:exec:next"));
}

#[tokio::test]
async fn the_token_tells_a_lapsed_later_grant_from_an_earlier_release() {
    // The owner released, took the lock again, and lost that later grant to
    // expiry. With the token the answer is exact; without it, the earlier
    // release is all the item shows (the ambiguity DESIGN.md documents).
    let store = direct().await;
    let lock = LockName::new(unique("regrant-lapsed")).unwrap();
    let (me, next) = (owner("arn:exec:looping"), owner("arn:exec:next"));
    let now = EpochMillis::now();
    grant(&store, &lock, &me, 60, now).await;
    assert_eq!(
        release_outcome(store.clone(), &event(&lock, &me, None), now).await,
        "released"
    );
    let later = grant(&store, &lock, &me, 1, now).await;
    grant(&store, &lock, &next, 60, now.plus_seconds(2)).await;
    let at = now.plus_seconds(3);

    let with_token = release_outcome(
        store.clone(),
        &event(&lock, &me, Some(later.fencing_token)),
        at,
    )
    .await;
    let without_token = release_outcome(store.clone(), &event(&lock, &me, None), at).await;

    assert_eq!(with_token, "held_by_other");
    assert_eq!(without_token, "released");
}

#[tokio::test]
async fn items_without_a_release_record_keep_working() {
    // An item as the code before `releasedBy` wrote it.
    let lock = LockName::new(unique("legacy")).unwrap();
    let (holder, stranger) = (owner("arn:exec:holder"), owner("arn:exec:stranger"));
    let now = EpochMillis::now();
    let expires_at = now.plus_seconds(60);
    client()
        .await
        .put_item()
        .table_name(table_name())
        .item("lockName", AttributeValue::S(lock.as_str().to_owned()))
        .item("owner", AttributeValue::S(holder.to_string()))
        .item("acquiredAt", AttributeValue::N(now.0.to_string()))
        .item("expiresAt", AttributeValue::N(expires_at.0.to_string()))
        .item("fencingToken", AttributeValue::N("41".into()))
        .item(
            "ttl",
            AttributeValue::N(
                expires_at
                    .plus_seconds(86_400)
                    .as_epoch_seconds_ceil()
                    .to_string(),
            ),
        )
        .send()
        .await
        .unwrap();
    let store = direct().await;

    assert_eq!(
        release_outcome(store.clone(), &event(&lock, &stranger, None), now).await,
        "held_by_other"
    );
    assert_eq!(
        release_outcome(store.clone(), &event(&lock, &holder, Some(41)), now).await,
        "released"
    );
    assert_eq!(
        release_outcome(store.clone(), &event(&lock, &stranger, None), now).await,
        "not_held"
    );

    let item = get_item(&client().await, lock.as_str()).await.unwrap();
    assert_eq!(
        item.get("releasedBy"),
        Some(&AttributeValue::S(holder.to_string()))
    );
    assert_eq!(
        item.get("releasedToken"),
        Some(&AttributeValue::N("41".into()))
    );
    assert_eq!(
        item.get("fencingToken"),
        Some(&AttributeValue::N("41".into()))
    );
}
