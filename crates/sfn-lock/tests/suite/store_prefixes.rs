//! Two stores in one bucket (or one SSM path tree) whose prefixes extend one
//! another, `team` and `team2`, keep apart: lock `2a` under the one and lock
//! `a` under the other are two locks (issue 23: S3 joined prefix and name
//! without a `/`, so both were the object `team2a`). Against the local server.

use crate::common;

use common::stores::{bucket, granted, lease, owner};
use common::unique;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::store::any::s3_client;
use sfn_lock::{AcquireOutcome, AnyStore, EpochMillis, LockName, LockStore, S3Store, StoreUrl};

/// `2a` held in `team` leaves `a` in `team2` free, and the other way round.
async fn prefixes_share_no_lock(team: AnyStore, team2: AnyStore, case: &str) {
    let (two_a, a) = (LockName::new("2a").unwrap(), LockName::new("a").unwrap());
    let now = EpochMillis::now();
    granted(
        team.acquire(&two_a, &owner("arn:team"), lease(60), now)
            .await
            .unwrap(),
    );
    let other = team2
        .acquire(&a, &owner("arn:team2"), lease(60), now)
        .await
        .unwrap();
    assert!(
        matches!(other, AcquireOutcome::Granted(_)),
        "{case}: `a` under team2 is another lock than `2a` under team: {other:?}"
    );
    let seen = team.inspect(&two_a).await.unwrap();
    let owners: Vec<&str> = seen.grants.iter().map(|g| g.owner.as_str()).collect();
    assert_eq!(owners, ["arn:team"], "{case}");
    for (store, name) in [(&team, "2a"), (&team2, "a")] {
        let listed = store.list_held(10).await.unwrap();
        let names: Vec<&str> = listed.locks.iter().map(|l| l.lock_name.as_str()).collect();
        assert_eq!(names, [name], "{case}: each lists its own lock only");
    }
}

#[tokio::test]
async fn s3_prefixes_that_extend_one_another_share_no_lock() {
    // The constructor, which any caller may use.
    let sdk = sdk_config().await;
    let base = unique("prefixes");
    let store = |prefix: &str| {
        let prefix = format!("{base}/{prefix}");
        AnyStore::S3(S3Store::s3(s3_client(&sdk), bucket(), prefix))
    };
    prefixes_share_no_lock(store("team"), store("team2"), "constructor").await;
}

#[tokio::test]
async fn s3_urls_whose_prefixes_extend_one_another_share_no_lock() {
    let sdk = sdk_config().await;
    let base = unique("prefixes");
    let store = |prefix: &str| {
        let url = StoreUrl::parse(&format!("s3://{}/{base}/{prefix}", bucket())).unwrap();
        AnyStore::from_url(&url, &sdk).unwrap()
    };
    prefixes_share_no_lock(store("team"), store("team2"), "url").await;
}

#[tokio::test]
async fn ssm_paths_that_extend_one_another_share_no_lock() {
    // SSM joins path and name with `/`: this holds it so.
    let sdk = sdk_config().await;
    let base = unique("prefixes");
    let store = |path: &str| {
        let url = StoreUrl::parse(&format!("ssm:///{base}/{path}")).unwrap();
        AnyStore::from_url(&url, &sdk).unwrap()
    };
    prefixes_share_no_lock(store("team"), store("team2"), "ssm").await;
}
