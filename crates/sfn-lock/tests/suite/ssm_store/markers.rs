//! SSM's owner markers are named by their grant's fencing token: an owner
//! that releases and takes the same lock again at once never creates again a
//! name deleted less than 30 seconds before (review finding 7: SSM documents
//! that as unsupported), and the sweep still finds every grant.

use super::common::ssm::parameters_under;
use super::common::stores::{granted, lease, lock, owner, store, SSM_PATH};
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::names::{encode_name, owner_hash};
use sfn_lock::{EpochMillis, LockStore, ReleaseOutcome};

#[tokio::test]
async fn ssm_a_release_and_a_new_grant_never_recreate_a_deleted_marker() {
    let store = store("ssm").await;
    let name = lock("marker-names");
    let me = owner("arn:marker-owner");
    let folder = format!(
        "{SSM_PATH}/.owners/{}/{}",
        owner_hash(me.as_str()),
        encode_name(name.as_str())
    );
    let now = EpochMillis::now();
    let first = granted(store.acquire(&name, &me, lease(60), now).await.unwrap());
    let before = parameters_under(&folder).await;
    assert_eq!(before.len(), 1, "one marker for the grant: {before:?}");
    assert!(store.locks_held_by(&me).await.unwrap().contains(&name));
    store.release(&name, &me, now).await.unwrap();
    assert_eq!(
        parameters_under(&folder).await,
        Vec::<String>::new(),
        "deleted at release"
    );
    let second = granted(store.acquire(&name, &me, lease(60), now).await.unwrap());
    assert!(second.fencing_token > first.fencing_token);
    let after = parameters_under(&folder).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(
        after, before,
        "the new grant's marker has a name never deleted"
    );
    // A renewal writes the same marker again.
    store.acquire(&name, &me, lease(60), now).await.unwrap();
    assert_eq!(parameters_under(&folder).await, after);
    assert!(store.locks_held_by(&me).await.unwrap().contains(&name));
}

#[tokio::test]
async fn ssm_a_name_too_long_for_a_grants_marker_is_refused_at_grant_only() {
    // Review finding: the token made the marker 21 characters longer; a lock
    // taken before with a name near the limit could no longer be released.
    let store = store("ssm").await;
    let room = 947 - (SSM_PATH.len() + "/.owners/".len() + 32 + 1);
    let name = (1..2000)
        .map(|n| "a".repeat(n))
        .find(|name| encode_name(name).len() > room - 21)
        .expect("a name just past the grant's limit");
    assert!(
        encode_name(&name).len() <= room,
        "within the release's limit"
    );
    let name = sfn_lock::LockName::new(name).expect("within the contract's 1,024 bytes");
    let me = owner("arn:long");
    let granted = store
        .acquire(&name, &me, lease(60), EpochMillis::now())
        .await;
    assert_eq!(super::common::stores::refused_field(granted), "lockName");
    let released = store.release(&name, &me, EpochMillis::now()).await;
    assert!(
        matches!(released, Ok(sfn_lock::ReleaseOutcome::NotHeld)),
        "{released:?}"
    );
}

/// A release that frees nothing deletes the owner's markers of grants that
/// are over (a release of theirs was cut before its marker's delete), but not
/// one an acquire of the owner's wrote for a grant still to come (its token
/// is above every token issued): that acquire may land its grant next.
#[tokio::test]
async fn ssm_a_release_that_frees_nothing_keeps_the_marker_of_a_grant_to_come() {
    let store = store("ssm").await;
    let name = lock("marker-to-come");
    let me = owner(&super::common::unique("arn:marker-owner"));
    let folder = format!(
        "{SSM_PATH}/.owners/{}/{}",
        owner_hash(me.as_str()),
        encode_name(name.as_str())
    );
    let now = EpochMillis::now();
    let first = granted(store.acquire(&name, &me, lease(60), now).await.unwrap());
    store.release(&name, &me, now).await.unwrap();
    let client = aws_sdk_ssm::Client::new(&sdk_config().await);
    let marker = |token: u64| format!("{folder}/{token:020}");
    // Left by a release of an earlier grant, and written by an acquire now.
    let (ended, to_come) = (
        marker(first.fencing_token - 1),
        marker(first.fencing_token + 1),
    );
    for name in [&ended, &to_come] {
        let put = client
            .put_parameter()
            .name(name)
            .value(me.as_str())
            .r#type(aws_sdk_ssm::types::ParameterType::String);
        put.send().await.unwrap();
    }
    let answer = store.release(&name, &me, now).await.unwrap();
    assert_eq!(answer, ReleaseOutcome::NotHeld);
    assert_eq!(
        parameters_under(&folder).await,
        vec![to_come],
        "the ended grant's marker goes, the coming grant's stays"
    );
}
