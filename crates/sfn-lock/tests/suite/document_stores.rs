//! What only the document stores (S3, SSM) must show: names they cannot hold
//! are refused, a write from a stale read changes nothing, S3's 409, 412 and
//! 404 answers are decided again from a fresh read, a release whose answer
//! was lost still answers `released`, a renewal marks again, each call's
//! requests, and neither keeps a queue. Against the local server (moto);
//! `ssm_store.rs` has what only SSM must show.

use crate::common;

use common::fault_proxy::{fault_proxy, generation_create, s3_fault_proxy};
use common::stores::{
    bucket, counted, granted, lease, owner, refused_field, store, S3_PREFIX, SSM_PATH,
};
use common::unique;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::any::s3_client;
use sfn_lock::store::document::doc::{decide_acquire, AcquireStep};
use sfn_lock::store::document::store::Documents;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, Limit, LockError, LockName, LockStore, Owner, S3Store,
    StoreError, TaskToken,
};

#[tokio::test]
async fn a_name_too_long_once_encoded_is_refused_and_nothing_is_written() {
    // 1024 bytes is a valid lock name; escaped, `/` takes three characters.
    let name = LockName::new("/".repeat(1024)).unwrap();
    for kind in ["s3", "ssm"] {
        let (store, requests) = counted(kind).await;
        let me = Owner::new(unique("arn:long")).unwrap();
        let result = store
            .acquire(&name, &me, lease(60), EpochMillis::now())
            .await;
        assert_eq!(refused_field(result), "lockName", "{kind}");
        assert_eq!(requests.take(), 0, "{kind}: refused before any request");
        let released = store.release(&name, &me, EpochMillis::now()).await;
        assert!(
            matches!(released, Err(StoreError::Refused { .. })),
            "{kind}"
        );
    }
    // DynamoDB holds any name the contract accepts.
    let dynamodb = store("dynamodb").await;
    let granted = dynamodb
        .acquire(&name, &owner("arn:long"), lease(60), EpochMillis::now())
        .await;
    assert!(matches!(granted, Ok(AcquireOutcome::Granted(_))));
    dynamodb
        .release(&name, &owner("arn:long"), EpochMillis::now())
        .await
        .unwrap();
}

#[tokio::test]
async fn stores_without_a_queue_refuse_a_task_token() {
    let token = TaskToken::new("token-1").unwrap();
    for kind in ["s3", "ssm"] {
        let store = store(kind).await;
        let name = LockName::new(unique("queue")).unwrap();
        let result = store
            .acquire_or_queue(
                &name,
                &owner("arn:q"),
                lease(60),
                Limit::ONE,
                &token.clone().into(),
                EpochMillis::now(),
            )
            .await;
        assert_eq!(refused_field(result), "taskToken", "{kind}");
    }
}

/// Two writers read the same version; only the first write lands.
async fn second_write_from_one_read_loses<D: Documents>(documents: &D) {
    let name = LockName::new(unique("stale")).unwrap();
    let now = EpochMillis::now();
    let doc = sfn_lock::store::document::doc::LockDoc {
        fencing_token: 7,
        updated_at: now.0,
        ..Default::default()
    };
    // The version of "no document yet", as the store reads it (SSM's read
    // carries the time it was answered at even then).
    let absent = documents.read(&name).await.unwrap();
    let absent = absent.as_ref().map(|(version, _)| version);
    assert!(documents.write(&name, absent, &doc, now).await.unwrap());
    assert!(
        !documents.write(&name, absent, &doc, now).await.unwrap(),
        "create twice"
    );
    let (version, read) = documents.read(&name).await.unwrap().expect("written");
    assert_eq!(read, doc);
    let first = sfn_lock::store::document::doc::LockDoc {
        fencing_token: 8,
        ..doc.clone()
    };
    let second = sfn_lock::store::document::doc::LockDoc {
        fencing_token: 9,
        ..doc.clone()
    };
    assert!(documents
        .write(&name, Some(&version), &first, now)
        .await
        .unwrap());
    assert!(!documents
        .write(&name, Some(&version), &second, now)
        .await
        .unwrap());
    let (_, read) = documents.read(&name).await.unwrap().expect("written");
    assert_eq!(read.fencing_token, 8, "the stale writer changed nothing");
}

#[tokio::test]
async fn a_write_from_a_stale_read_changes_nothing() {
    match store("s3").await {
        AnyStore::S3(store) => second_write_from_one_read_loses(&store.documents).await,
        _ => unreachable!(),
    }
    match store("ssm").await {
        AnyStore::Ssm(store) => second_write_from_one_read_loses(&store.documents).await,
        _ => unreachable!(),
    }
}

async fn s3_store_via(endpoint: &str) -> S3Store {
    let config = s3_client(&sdk_config().await)
        .config()
        .to_builder()
        .endpoint_url(endpoint)
        .build();
    S3Store::s3(aws_sdk_s3::Client::from_conf(config), bucket(), S3_PREFIX)
}

#[tokio::test]
async fn s3_conflicts_and_vanished_objects_are_decided_again_from_a_fresh_read() {
    for (status, code) in [
        (409, "ConditionalRequestConflict"),
        (404, "NoSuchKey"),
        (412, "PreconditionFailed"),
    ] {
        let name = LockName::new(unique("s3-fault")).unwrap();
        // An object exists (released), so the grant is an If-Match replace.
        let direct = store("s3").await;
        let now = EpochMillis::now();
        direct
            .acquire(&name, &owner("arn:before"), lease(60), now)
            .await
            .unwrap();
        direct
            .release(&name, &owner("arn:before"), now)
            .await
            .unwrap();

        let (url, faults) = s3_fault_proxy(&[(status, code)]).await;
        let store = s3_store_via(&url).await;
        let granted = store
            .acquire(&name, &owner("arn:me"), lease(60), now)
            .await
            .unwrap();
        assert!(
            matches!(granted, AcquireOutcome::Granted(_)),
            "{code}: {granted:?}"
        );
        assert_eq!(
            faults.injected().len(),
            1,
            "{code}: one write refused, then decided again"
        );
        let rival = direct
            .acquire(&name, &owner("arn:rival"), lease(60), now)
            .await
            .unwrap();
        assert!(
            matches!(rival, AcquireOutcome::Held(_)),
            "{code}: the grant landed"
        );
    }
}

#[tokio::test]
async fn s3_conflicts_without_end_become_lock_store_unavailable() {
    let conflicts =
        [(409, "ConditionalRequestConflict"); sfn_lock::store::document::store::MAX_ROUNDS];
    let (url, faults) = s3_fault_proxy(&conflicts).await;
    let store = s3_store_via(&url).await;
    let name = LockName::new(unique("s3-conflicts")).unwrap();
    let result = store
        .acquire(&name, &owner("arn:me"), lease(60), EpochMillis::now())
        .await;
    let error = LockError::from(result.expect_err("every round lost"));
    assert_eq!(error.error_type(), "LockStoreUnavailable");
    assert_eq!(
        faults.injected().len(),
        sfn_lock::store::document::store::MAX_ROUNDS
    );
    // Nothing was written: the lock is free.
    let free = store
        .acquire(&name, &owner("arn:next"), lease(60), EpochMillis::now())
        .await;
    assert!(matches!(free, Ok(AcquireOutcome::Granted(_))));
}

async fn ssm_store_via(endpoint: &str) -> sfn_lock::SsmStore {
    let config = aws_sdk_ssm::config::Builder::from(&sdk_config().await)
        .endpoint_url(endpoint)
        .build();
    sfn_lock::SsmStore::ssm(aws_sdk_ssm::Client::from_conf(config), SSM_PATH)
}

#[tokio::test]
async fn a_release_whose_answer_was_lost_still_answers_released() {
    // The SDK sends the landed write again; its condition now fails, and the
    // release record the first attempt wrote tells the retry it was its own.
    for kind in ["s3", "ssm"] {
        let name = LockName::new(unique("lost-answer")).unwrap();
        let now = EpochMillis::now();
        let direct = store(kind).await;
        direct
            .acquire(&name, &owner("arn:me"), lease(60), now)
            .await
            .unwrap();
        let (store, faults) = match kind {
            "s3" => {
                let (url, faults) = s3_fault_proxy(&[(0, "lose the answer")]).await;
                (AnyStore::S3(s3_store_via(&url).await), faults)
            }
            _ => {
                let (url, faults) =
                    fault_proxy("AWS_ENDPOINT_URL_SSM", generation_create, &[(0, "lose")]).await;
                (AnyStore::Ssm(ssm_store_via(&url).await), faults)
            }
        };
        let released = store.release(&name, &owner("arn:me"), now).await.unwrap();
        assert_eq!(faults.injected().len(), 1, "{kind}: one answer lost");
        assert_eq!(released, sfn_lock::ReleaseOutcome::Released, "{kind}");
        let free = direct
            .acquire(&name, &owner("arn:next"), lease(60), now)
            .await
            .unwrap();
        assert!(
            matches!(free, AcquireOutcome::Granted(_)),
            "{kind}: {free:?}"
        );
    }
}

#[tokio::test]
async fn a_renewal_marks_the_lock_again() {
    // Review finding: a marker lost (SSM may drop one re-created within 30 s
    // of its deletion) was never mended, and the sweep missed the lock.
    for kind in ["s3", "ssm"] {
        let store = store(kind).await;
        let name = LockName::new(unique("remark")).unwrap();
        let me = Owner::new(unique("arn:remark")).unwrap();
        let now = EpochMillis::now();
        store.acquire(&name, &me, lease(60), now).await.unwrap();
        match &store {
            AnyStore::S3(s) => s.documents.unmark(&me, &name).await.unwrap(),
            AnyStore::Ssm(s) => s.documents.unmark(&me, &name).await.unwrap(),
            AnyStore::DynamoDb(_) => unreachable!(),
        }
        assert_eq!(store.locks_held_by(&me).await.unwrap(), [], "{kind}");
        store.acquire(&name, &me, lease(60), now).await.unwrap();
        assert_eq!(store.locks_held_by(&me).await.unwrap(), [name], "{kind}");
    }
}

#[tokio::test]
async fn requests_per_call_are_as_designed() {
    // DESIGN.md's request tables, counted at the wire: (store, fresh acquire,
    // contended acquire, release, acquire of a used name).
    for (kind, fresh, contended, release, reused) in [("s3", 3, 1, 3, 3), ("ssm", 5, 2, 6, 5)] {
        let (store, requests) = counted(kind).await;
        let name = LockName::new(unique("counted")).unwrap();
        let now = EpochMillis::now();
        store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap();
        assert_eq!(requests.take(), fresh, "{kind}: fresh acquire");
        store
            .acquire(&name, &owner("arn:b"), lease(60), now)
            .await
            .unwrap();
        assert_eq!(requests.take(), contended, "{kind}: contended acquire");
        store.release(&name, &owner("arn:a"), now).await.unwrap();
        assert_eq!(requests.take(), release, "{kind}: release");
        store
            .acquire(&name, &owner("arn:b"), lease(60), now)
            .await
            .unwrap();
        assert_eq!(requests.take(), reused, "{kind}: acquire of a used name");
    }
}

#[tokio::test]
async fn tokens_rise_after_the_lock_was_deleted() {
    // S3's lifecycle rule deletes a lock unused for 400 days (someone may
    // also delete SSM parameters by hand): the next document counts on from
    // the grant time in microseconds, above every token the old one issued.
    for kind in ["s3", "ssm"] {
        let store = store(kind).await;
        let name = LockName::new(unique("deleted")).unwrap();
        let now = EpochMillis::now();
        let first = granted(
            store
                .acquire(&name, &owner("arn:a"), lease(60), now)
                .await
                .unwrap(),
        )
        .fencing_token;
        store.release(&name, &owner("arn:a"), now).await.unwrap();
        let sdk = sdk_config().await;
        let encoded = sfn_lock::store::names::encode_name(name.as_str());
        if kind == "s3" {
            let client = s3_client(&sdk);
            let key = format!("{S3_PREFIX}{encoded}");
            client
                .delete_object()
                .bucket(bucket())
                .key(key)
                .send()
                .await
                .unwrap();
        } else {
            let client = aws_sdk_ssm::Client::new(&sdk);
            let path = format!("{SSM_PATH}/{encoded}");
            let page = client
                .get_parameters_by_path()
                .path(path)
                .send()
                .await
                .unwrap();
            let names = page
                .parameters()
                .iter()
                .filter_map(|p| p.name().map(str::to_string));
            let names: Vec<String> = names.collect();
            assert!(!names.is_empty());
            client
                .delete_parameters()
                .set_names(Some(names))
                .send()
                .await
                .unwrap();
        }
        let later = EpochMillis(now.0 + 1);
        match store
            .acquire(&name, &owner("arn:b"), lease(60), later)
            .await
            .unwrap()
        {
            AcquireOutcome::Granted(lease) => assert!(lease.fencing_token > first, "{kind}"),
            other => panic!("{kind}: {other:?}"),
        }
    }
}

/// Review finding: a release of a lock that has no document (never used,
/// deleted by hand, or a store switch) must not make the next grant count
/// from 0 (SSM's confirmation wrote a document with token 0).
#[tokio::test]
async fn a_first_grant_after_a_not_held_release_starts_at_the_token_base() {
    for kind in ["s3", "ssm"] {
        let store = store(kind).await;
        let name = LockName::new(unique("token-after-release")).unwrap();
        let now = EpochMillis::now();
        let released = store.release(&name, &owner("arn:x"), now).await.unwrap();
        assert_eq!(released, sfn_lock::ReleaseOutcome::NotHeld, "{kind}");
        match store
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap()
        {
            AcquireOutcome::Granted(lease) => assert!(
                lease.fencing_token > (now.0 as u64) * 1000,
                "{kind}: token {} below the token base",
                lease.fencing_token
            ),
            other => panic!("{kind}: {other:?}"),
        }
    }
}

/// Review finding: acquire marks once (round 1); a release of the same owner that answers
/// not_held and unmarks between that mark and the acquire's winning write
/// leaves a grant without a marker: the sweep cannot find it.
async fn marker_race<D: Documents>(
    store: &sfn_lock::store::document::store::DocumentStore<D>,
    kind: &str,
) {
    let name = LockName::new(unique("marker-race")).unwrap();
    let me = owner(&unique("arn:me"));
    let now = EpochMillis::now();
    let docs = &store.documents;
    // Acquire, round 1: reads, marks, (its write loses; not simulated).
    docs.mark(&me, &name, 1).await.unwrap();
    // The same owner's release (e.g. Release Lock After Failure while the
    // earlier acquire invocation still runs): not_held, unmark.
    let released = store
        .release_with_limit(&name, &me, Limit::ONE, now)
        .await
        .unwrap();
    assert_eq!(released, sfn_lock::ReleaseOutcome::NotHeld, "{kind}");
    // Acquire, round 2: fresh read, grant, no mark (already marked).
    let read = docs.read(&name).await.unwrap();
    let (version, doc) = match &read {
        Some((v, d)) => (Some(v), Some(d)),
        None => (None, None),
    };
    let AcquireStep::Write(next, AcquireOutcome::Granted(_)) =
        decide_acquire(doc, (&name, &me), lease(60), Limit::ONE, now)
    else {
        panic!("{kind}: expected a grant")
    };
    assert!(
        docs.write(&name, version, &next, now).await.unwrap(),
        "{kind}"
    );
    let held = store.locks_held_by(&me).await.unwrap();
    assert!(held.contains(&name), "{kind}: a grant without a marker");
}

#[tokio::test]
async fn a_grant_never_lacks_its_marker() {
    match store("s3").await {
        AnyStore::S3(s) => marker_race(&s, "s3").await,
        _ => unreachable!(),
    }
    match store("ssm").await {
        AnyStore::Ssm(s) => marker_race(&s, "ssm").await,
        _ => unreachable!(),
    }
}

/// Explorer finding (issue 24): a `sfn-lock run` whose take failed, or whose
/// process was killed, left its owner marker behind for good: only the sweep
/// deletes markers, and the sweep never looks up an owner that is no ARN
/// (the CLI's `host:pid:random`). On SSM each is a parameter of the
/// account's 10,000. Such an owner is not marked at all.
#[tokio::test]
async fn an_owner_the_sweep_never_looks_up_leaves_no_marker() {
    for kind in ["s3", "ssm"] {
        let (store, requests) = counted(kind).await;
        let name = LockName::new(unique("cli-owner")).unwrap();
        let cli = owner(&unique("host:4242:abc"));
        let now = EpochMillis::now();
        granted(store.acquire(&name, &cli, lease(60), now).await.unwrap());
        assert!(
            store.locks_held_by(&cli).await.unwrap().is_empty(),
            "{kind}: a CLI owner's grant left a marker no sweep will ever delete"
        );
        // An execution is still marked, so that the sweep finds its grant.
        let execution = owner(&unique("arn:aws:states:us-east-1:1:execution:m:e"));
        let other = LockName::new(unique("execution-owner")).unwrap();
        let acquired = store.acquire(&other, &execution, lease(60), now);
        granted(acquired.await.unwrap());
        let held = store.locks_held_by(&execution).await.unwrap();
        assert_eq!(held, vec![other.clone()], "{kind}");
        // Releases alike but for the markers: the CLI owner's deletes none.
        requests.take();
        store.release(&name, &cli, now).await.unwrap();
        let unmarked = requests.take();
        store.release(&other, &execution, now).await.unwrap();
        let marked = requests.take();
        assert!(
            unmarked < marked,
            "{kind}: an unmarked owner's release still deletes markers ({unmarked} requests; {marked} with markers)"
        );
    }
}
