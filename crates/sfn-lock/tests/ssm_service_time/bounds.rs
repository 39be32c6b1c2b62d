//! A lock's parameters stay bounded when `DeleteParameters` keeps failing
//! (review finding 5: every checkpoint was kept, and after about two hours
//! each write exceeded 4 KB: the lock could be neither taken nor freed).

use super::common::fault_proxy::fault_proxy;
use super::common::ssm::{advance, current_hint, generations, serial, ssm_store_via};
use super::common::stores::{lease, lock, owner};
use sfn_lock::store::document::ssm::{MAX_KEPT_GENERATIONS, MAX_VALUE_BYTES};
use sfn_lock::{AcquireOutcome, EpochMillis, LockStore, ReleaseOutcome, StoreError};

/// A `DeleteParameters` of generations (markers' deletes pass).
fn generation_delete(head: &str, body: &[u8]) -> bool {
    head.contains("x-amz-target: amazonssm.deleteparameters")
        && !String::from_utf8_lossy(body).contains("/.owners/")
}

#[tokio::test]
async fn ssm_denied_deletes_keep_a_lock_bounded_and_releasable() {
    let _serial = serial().await;
    let denials = vec![(400, "AccessDeniedException"); 2 * MAX_KEPT_GENERATIONS as usize];
    let (url, faults) = fault_proxy("AWS_ENDPOINT_URL_SSM", generation_delete, &denials).await;
    let store = ssm_store_via(&url).await;
    let name = lock("denied-deletes");
    let now = EpochMillis::now();
    // A change every two minutes of SSM's time, every delete denied.
    let mut refused = None;
    for cycle in 0..MAX_KEPT_GENERATIONS {
        advance(120);
        match store.acquire(&name, &owner("arn:a"), lease(60), now).await {
            Ok(AcquireOutcome::Granted(_)) => {}
            Err(StoreError::Misconfigured(why)) => {
                refused = Some((cycle, why));
                break;
            }
            other => panic!("cycle {cycle}: {other:?}"),
        }
        let hint = current_hint(&name, None).await.expect("a hint");
        assert!(
            hint.len() <= MAX_VALUE_BYTES,
            "cycle {cycle}: {} bytes",
            hint.len()
        );
        let released = store.release(&name, &owner("arn:a"), now).await;
        assert!(
            matches!(released, Ok(ReleaseOutcome::Released)),
            "{released:?}"
        );
    }
    assert!(!faults.injected().is_empty(), "deletes were denied");
    let (cycle, why) = refused.expect("a grant is refused once the backlog is full");
    assert!(why.contains("DeleteParameters"), "{why}");
    assert!(cycle <= MAX_KEPT_GENERATIONS / 2 + 1, "cycle {cycle}");
    let kept = generations(&name).await.len() as u64;
    assert!(kept <= MAX_KEPT_GENERATIONS + 1, "{kept} generations");
}

#[tokio::test]
async fn ssm_denied_deletes_bound_renewals_too() {
    // Review finding (F3): grants stopped at the bound, renewals did not: one
    // `sfn-lock run` renewing every 20 s added 4,320 parameters a day.
    let _serial = serial().await;
    let renewals = MAX_KEPT_GENERATIONS as usize + 20;
    let denials = vec![(400, "AccessDeniedException"); 2 * renewals];
    let (url, _faults) = fault_proxy("AWS_ENDPOINT_URL_SSM", generation_delete, &denials).await;
    let store = ssm_store_via(&url).await;
    let name = lock("renewal-growth");
    let now = EpochMillis::now();
    store
        .acquire(&name, &owner("arn:a"), lease(3600), now)
        .await
        .unwrap();
    let mut refused = false;
    for _ in 0..renewals {
        advance(20);
        match store
            .acquire(&name, &owner("arn:a"), lease(3600), now)
            .await
        {
            Ok(AcquireOutcome::Renewed(_)) => {}
            Err(StoreError::Misconfigured(why)) if why.contains("DeleteParameters") => {
                refused = true;
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(refused, "a renewal is refused once the backlog is full");
    let released = store.release(&name, &owner("arn:a"), now).await;
    assert!(
        matches!(released, Ok(ReleaseOutcome::Released)),
        "{released:?}"
    );
    let kept = generations(&name).await.len() as u64;
    assert!(kept <= MAX_KEPT_GENERATIONS + 2, "{kept} generations");
}
