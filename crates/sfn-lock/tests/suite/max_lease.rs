//! `MAX_LEASE_SECONDS`: a request for a longer lease is refused before
//! anything is written (whoever may invoke acquire-lock may otherwise hold a
//! lock for a year); at the cap, and without a lease of its own, it is granted.

use crate::common;

use common::stores::{lease, lock, store};
use serde_json::json;
use sfn_lock::{EpochMillis, LockError, LockStore, Locker};

#[tokio::test]
async fn a_lease_above_the_cap_is_refused_and_writes_nothing() {
    let locker = Locker::new(store("dynamodb").await, lease(900)).with_max_lease(Some(lease(3600)));
    let name = lock("max-lease");
    let event = |seconds: Option<u32>| {
        let mut event = json!({"lockName": name.as_str(), "owner": "arn:exec:capped"});
        if let Some(seconds) = seconds {
            event["leaseSeconds"] = json!(seconds);
        }
        event
    };
    let refused = locker.acquire(&event(Some(3601)), EpochMillis::now()).await;
    match refused {
        Err(LockError::InvalidRequest { field, rule }) => {
            assert_eq!(field, "leaseSeconds");
            assert!(
                rule.contains("3600") && rule.contains("MAX_LEASE_SECONDS"),
                "{rule}"
            );
        }
        other => panic!("expected InvalidLockRequest, got {other:?}"),
    }
    let store = store("dynamodb").await;
    assert_eq!(
        store.inspect(&name).await.unwrap().fencing_token,
        None,
        "nothing written"
    );

    let at_cap = locker
        .acquire(&event(Some(3600)), EpochMillis::now())
        .await
        .unwrap();
    assert_eq!(
        (at_cap.outcome.as_str(), at_cap.lease_seconds),
        ("granted", 3600)
    );
    locker
        .release(&event(None), EpochMillis::now())
        .await
        .unwrap();
    // No leaseSeconds: the default (900), which the configuration keeps within the cap.
    let default = locker
        .acquire(&event(None), EpochMillis::now())
        .await
        .unwrap();
    assert_eq!(
        (default.outcome.as_str(), default.lease_seconds),
        ("granted", 900)
    );
}

/// The cap bounds one request's lease, not a holding: a caller that keeps
/// renewing (naming the owner is enough) keeps the lock past it. docs/operating.md,
/// "Trust model", says so; this test keeps it true.
#[tokio::test]
async fn the_cap_bounds_each_lease_and_renewals_extend_the_holding() {
    let locker = Locker::new(store("dynamodb").await, lease(60)).with_max_lease(Some(lease(60)));
    let name = lock("max-lease-renewed");
    let event =
        json!({"lockName": name.as_str(), "owner": "arn:exec:keeps-calling", "leaseSeconds": 60});
    let start = EpochMillis::now();
    let first = locker.acquire(&event, start).await.unwrap();
    let later = EpochMillis(start.0 + 50_000);
    let renewed = locker.acquire(&event, later).await.unwrap();
    assert_eq!(renewed.outcome, "renewed");
    assert_eq!(renewed.fencing_token, first.fencing_token);
    assert_eq!(
        EpochMillis::parse_rfc3339(&renewed.expires_at),
        Some(EpochMillis(start.0 + 110_000)),
        "held past the 60 s cap from the first grant"
    );
}
