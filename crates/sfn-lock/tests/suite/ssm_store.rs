//! What only the SSM store must show: a hint that lags misleading nobody, an
//! answer without a write confirmed by a create, `TooManyUpdates`, and the
//! 4 KB a parameter holds. Against the local server. (What depends on SSM's
//! clock is in ssm_service_time.rs.)

use crate::common;

#[path = "ssm_store/markers.rs"]
mod markers;

use common::fault_proxy::{fault_proxy, generation_create};
use common::ssm::{generations, ssm_store_via};
use common::stores::{lease, owner, refused_field, store, SSM_PATH};
use common::unique;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::document::store::Documents;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, LeaseSeconds, Limit, LockName, LockStore, Owner,
    StoreError,
};

#[tokio::test]
async fn ssm_a_lagging_current_hint_is_repaired_and_decides_nothing() {
    let store = store("ssm").await;
    let name = LockName::new(unique("lagging")).unwrap();
    let now = EpochMillis::now();
    let client = aws_sdk_ssm::Client::new(&sdk_config().await);
    let lock_path = format!(
        "{SSM_PATH}/{}",
        sfn_lock::store::names::encode_name(name.as_str())
    );
    store
        .acquire(&name, &owner("arn:a"), lease(60), now)
        .await
        .unwrap();
    // The hint as it was after generation 1 (a free lock would read as held by a).
    let first = client
        .get_parameter()
        .name(format!("{lock_path}/current"))
        .send()
        .await
        .unwrap();
    let stale = first
        .parameter()
        .and_then(|p| p.value())
        .unwrap()
        .to_string();
    store.release(&name, &owner("arn:a"), now).await.unwrap();
    client
        .put_parameter()
        .name(format!("{lock_path}/current"))
        .value(stale)
        .overwrite(true)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    // The stale hint says a holds it; generation 2 (released) is the truth.
    let b = store
        .acquire(&name, &owner("arn:b"), lease(60), now)
        .await
        .unwrap();
    assert!(matches!(b, AcquireOutcome::Granted(_)), "{b:?}");
    assert_eq!(generations(&name).await.len(), 3);
    let a_again = store.release(&name, &owner("arn:a"), now).await.unwrap();
    assert!(
        matches!(&a_again, sfn_lock::ReleaseOutcome::HeldByOther(h) if h.owner == "arn:b"),
        "{a_again:?}"
    );
}

#[tokio::test]
async fn ssm_refuses_holders_whose_state_would_not_fit_a_parameter() {
    let store = store("ssm").await;
    let name = LockName::new(unique("too-many")).unwrap();
    let five = Limit::new("limit", 5).unwrap();
    let long = |n: usize| Owner::new(format!("arn:{n}:{}", "x".repeat(1500))).unwrap();
    let now = EpochMillis::now();
    for n in 0..2 {
        let granted = store
            .acquire_with_limit(&name, &long(n), lease(60), five, now)
            .await
            .unwrap();
        assert!(matches!(granted, AcquireOutcome::Granted(_)));
    }
    let third = store
        .acquire_with_limit(&name, &long(2), lease(60), five, now)
        .await;
    assert_eq!(refused_field(third), "limit");
    // Nothing changed: the two holders stand, the third is not among them.
    let short = owner("arn:short");
    let two = Limit::new("limit", 2).unwrap();
    let sixth = store
        .acquire_with_limit(&name, &short, lease(60), two, now)
        .await;
    let AcquireOutcome::Held(contention) = sixth.unwrap() else {
        panic!("two holders fill a limit of 2");
    };
    assert_eq!(contention.holders.len(), 2);
}

#[tokio::test]
async fn ssm_an_answer_without_a_write_is_confirmed_by_creating_the_next_generation() {
    // Review finding: SSM reads may be stale, and a release that read a state
    // from before its own grant would answer not_held and leave the lock held.
    let AnyStore::Ssm(store) = store("ssm").await else {
        unreachable!()
    };
    let name = LockName::new(unique("confirm")).unwrap();
    let now = EpochMillis::now();
    let (old_version, old_doc) = {
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap();
        store
            .documents
            .read(&name)
            .await
            .unwrap()
            .expect("generation 1")
    };
    store.release(&name, &owner("arn:a"), now).await.unwrap();
    let documents = &store.documents;
    let a = owner("arn:a");
    let stale = documents.confirm(&name, &a, Some(&old_version), Some(&old_doc), now);
    assert!(
        !stale.await.unwrap(),
        "a read with a newer generation beside it is not confirmed"
    );
    assert_eq!(generations(&name).await.len(), 2, "and nothing was written");
    let (newest, doc) = documents.read(&name).await.unwrap().expect("generation 2");
    assert!(documents
        .confirm(&name, &owner("arn:a"), Some(&newest), Some(&doc), now)
        .await
        .unwrap());
    assert_eq!(
        generations(&name).await.len(),
        3,
        "the confirmation is a generation"
    );
}

#[tokio::test]
async fn ssm_too_many_updates_on_a_create_is_decided_again() {
    // Review finding: SSM refuses one of concurrent updates with
    // TooManyUpdates, which the SDK does not retry: another change came first.
    let (url, faults) = fault_proxy(
        "AWS_ENDPOINT_URL_SSM",
        generation_create,
        &[(400, "TooManyUpdates")],
    )
    .await;
    let store = AnyStore::Ssm(ssm_store_via(&url).await);
    let name = LockName::new(unique("too-many-updates")).unwrap();
    let granted = store
        .acquire(&name, &owner("arn:me"), lease(60), EpochMillis::now())
        .await;
    assert!(
        matches!(granted, Ok(AcquireOutcome::Granted(_))),
        "{granted:?}"
    );
    assert_eq!(faults.injected().len(), 1);
}

#[tokio::test]
async fn ssm_a_full_semaphore_can_always_release() {
    // Review finding: the 4 KB check refused a release that grew the state
    // by a record. Grants leave room, so every release and renewal fits.
    let store = store("ssm").await;
    let name = LockName::new(unique("full")).unwrap();
    let limit = Limit::new("limit", 60).unwrap();
    let now = EpochMillis::now();
    let mut holders = Vec::new();
    for n in 0..60 {
        let me = owner(&format!("o{n}"));
        match store
            .acquire_with_limit(&name, &me, lease(60), limit, now)
            .await
        {
            Ok(AcquireOutcome::Granted(_)) => holders.push(me),
            Err(StoreError::Refused { field, .. }) if field == "limit" => break,
            other => panic!("{other:?}"),
        }
    }
    assert!(
        holders.len() > 10 && holders.len() < 60,
        "{} holders",
        holders.len()
    );
    for me in &holders {
        let renewed = store
            .acquire_with_limit(&name, me, lease(60), limit, now)
            .await
            .unwrap();
        assert!(matches!(renewed, AcquireOutcome::Renewed(_)));
        let released = store
            .release_with_limit(&name, me, limit, now)
            .await
            .unwrap();
        assert_eq!(released, sfn_lock::ReleaseOutcome::Released);
    }
}

/// Review finding: a grant that replaces an expired holder does not add to
/// the holder count, so SSM's headroom check was skipped.
#[tokio::test]
async fn ssm_a_grant_replacing_an_expired_holder_is_size_checked() {
    let store = store("ssm").await;
    let name = LockName::new(unique("size")).unwrap();
    let now = EpochMillis::now();
    let limit = Limit::new("limit", 2).unwrap();
    let long = |c: &str| owner(&format!("arn:{}", c.repeat(1900)));
    let short = LeaseSeconds::new("leaseSeconds", 1).unwrap();
    let a = store
        .acquire_with_limit(
            &name,
            &long("a"),
            LeaseSeconds::new("leaseSeconds", 600).unwrap(),
            limit,
            now,
        )
        .await;
    assert!(matches!(a, Ok(AcquireOutcome::Granted(_))), "{a:?}");
    let b = store
        .acquire_with_limit(&name, &owner("arn:b"), short, limit, now)
        .await;
    assert!(matches!(b, Ok(AcquireOutcome::Granted(_))), "{b:?}");
    let later = EpochMillis(now.0 + 5_000);
    let c = store
        .acquire_with_limit(&name, &long("c"), lease(60), limit, later)
        .await;
    assert!(
        matches!(&c, Err(StoreError::Refused { field, .. }) if field == "limit"),
        "{c:?}"
    );
}

/// How many of `owners` a limit-`limit` semaphore grants before it refuses
/// one for size (`InvalidLockRequest` naming `limit`).
async fn holders_that_fit(
    store: &AnyStore,
    name: &LockName,
    owners: &[Owner],
    limit: Limit,
) -> usize {
    let now = EpochMillis::now();
    for (n, holder) in owners.iter().enumerate() {
        let answer = store
            .acquire_with_limit(name, holder, lease(60), limit, now)
            .await;
        match answer {
            Ok(AcquireOutcome::Granted(_)) => continue,
            refused => {
                assert_eq!(refused_field(refused), "limit");
                return n;
            }
        }
    }
    owners.len()
}

#[tokio::test]
async fn ssm_how_many_holders_fit_does_not_depend_on_the_locks_history() {
    // Review finding 6: the size check counted release records a grant
    // would drop, so a used lock fitted fewer holders than a fresh one.
    let store = store("ssm").await;
    let twelve = Limit::new("limit", 12).unwrap();
    let long = |n: usize| Owner::new(format!("arn:{n:03}:{}", "x".repeat(300))).unwrap();
    let owners: Vec<Owner> = (0..12).map(long).collect();
    let fresh = holders_that_fit(
        &store,
        &LockName::new(unique("fresh")).unwrap(),
        &owners,
        twelve,
    )
    .await;
    let used = LockName::new(unique("used")).unwrap();
    let now = EpochMillis::now();
    for n in 100..108 {
        store
            .acquire_with_limit(&used, &long(n), lease(60), twelve, now)
            .await
            .unwrap();
        store.release(&used, &long(n), now).await.unwrap();
    }
    let after_history = holders_that_fit(&store, &used, &owners, twelve).await;
    assert!(
        fresh < owners.len(),
        "the owners are long enough to reach the size bound"
    );
    assert_eq!(after_history, fresh);
}
