//! An SSM lock nobody uses is reclaimed down to its `current` parameter
//! (review finding 4: an idle lock kept two generations and `current`
//! forever, and the account's 10,000 parameters filled up), in two steps
//! each after seven minutes of SSM's time, and comes back to use as if never
//! reclaimed: the chain goes on, tokens rise.

use super::common::ssm::{advance, last_names_under, serial, ssm_store_at};
use super::common::stores::{granted, lease, owner};
use super::common::unique;
use sfn_lock::store_names::encode_name;
use sfn_lock::{AcquireOutcome, EpochMillis, LockName, LockStore};

/// Past the reclaim wait (seven minutes), in seconds.
const IDLE: u64 = 8 * 60;

#[tokio::test]
async fn ssm_an_idle_lock_is_reclaimed_to_its_hint_and_used_again() {
    let _serial = serial().await;
    let path = format!("/sfn-lock-test/{}", unique("reclaim"));
    let store = ssm_store_at(&path).await;
    let idle = LockName::new("idle").unwrap();
    let busy = LockName::new("busy").unwrap();
    let folder = format!("{path}/{}", encode_name(idle.as_str()));
    let now = EpochMillis::now();
    let first = granted(
        store
            .acquire(&idle, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    let open_hint = current_hint_at(&folder).await;
    store.release(&idle, &owner("arn:a"), now).await.unwrap();
    granted(
        store
            .acquire(&busy, &owner("arn:b"), lease(86_400), now)
            .await
            .unwrap(),
    );
    let nothing_yet = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        (
            nothing_yet.looked_at,
            nothing_yet.closed,
            nothing_yet.emptied
        ),
        (2, 0, 0)
    );

    advance(IDLE);
    let closed = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        (closed.closed, closed.emptied),
        (1, 0),
        "the free one only: {closed:?}"
    );
    let again = store.reclaim_idle(100).await.unwrap();
    assert_eq!(
        (again.closed, again.emptied),
        (0, 0),
        "the tombstone waits too"
    );
    advance(IDLE);
    let emptied = store.reclaim_idle(100).await.unwrap();
    assert_eq!((emptied.closed, emptied.emptied, emptied.failed), (0, 1, 0));
    assert_eq!(last_names_under(&folder).await, ["current"]);
    let busy_folder = format!("{path}/{}", encode_name(busy.as_str()));
    assert!(
        last_names_under(&busy_folder).await.len() > 1,
        "a held lock keeps its chain"
    );

    // A hint written late, by a writer that stalled after its create, over
    // the tombstone: the hint's history still finds the tombstone.
    set_hint_at(&folder, &open_hint).await;
    let back = granted(
        store
            .acquire(&idle, &owner("arn:c"), lease(60), now)
            .await
            .unwrap(),
    );
    assert!(
        back.fencing_token > first.fencing_token,
        "tokens rise across a reclaim"
    );
    let taken = store
        .acquire(&idle, &owner("arn:d"), lease(60), now)
        .await
        .unwrap();
    assert!(
        matches!(&taken, AcquireOutcome::Held(c) if c.holders[0].owner == "arn:c"),
        "{taken:?}"
    );
    let names = last_names_under(&folder).await;
    assert_eq!(
        names.len(),
        2,
        "current and the generation after the tombstone: {names:?}"
    );
}

async fn current_hint_at(folder: &str) -> String {
    let client = aws_sdk_ssm::Client::new(&sfn_lock::lambda::sdk_config().await);
    let got = client
        .get_parameter()
        .name(format!("{folder}/current"))
        .send()
        .await
        .unwrap();
    got.parameter().and_then(|p| p.value()).unwrap().to_string()
}

async fn set_hint_at(folder: &str, value: &str) {
    let client = aws_sdk_ssm::Client::new(&sfn_lock::lambda::sdk_config().await);
    client
        .put_parameter()
        .name(format!("{folder}/current"))
        .value(value)
        .overwrite(true)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
}
