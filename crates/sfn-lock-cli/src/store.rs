//! Where the CLI finds the lock: `--store URL`, else the environment the
//! Lambda functions read (`LOCK_STORE_URL` or `LOCK_TABLE_NAME`), with the
//! standard AWS variables for credentials, Region and endpoints.

use aws_config::SdkConfig;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::lambda::store_with_waker;
use sfn_lock::{AnyStore, StoreUrl};

/// The store, or one line saying why there is none (exit status 1).
pub async fn open(store: Option<&str>) -> Result<(AnyStore, StoreUrl), String> {
    open_with_sdk(store)
        .await
        .map(|(store, url, _)| (store, url))
}

/// [`open`], and the SDK configuration its clients came from (`run` reads
/// the store's clock with it: `run/clock/mod.rs`).
pub async fn open_with_sdk(store: Option<&str>) -> Result<(AnyStore, StoreUrl, SdkConfig), String> {
    // clap reads LOCK_STORE_URL into `store`; empty, it is unset, as the
    // functions take it, and LOCK_TABLE_NAME may name the table.
    let url = match store.filter(|url| !url.trim().is_empty()) {
        Some(url) => StoreUrl::parse(url),
        None => StoreUrl::from_lookup(|name| std::env::var(name).ok()),
    };
    let sdk = sdk_config().await;
    // With a waker: a release (run's, or --force) on a lock with a queue
    // hands it to the next waiter and wakes it (states:SendTaskSuccess),
    // as the functions do, instead of leaving it to the reconciler.
    url.and_then(|url| Ok((store_with_waker(&url, &sdk)?, url)))
        .map(|(store, url)| (store, url, sdk))
        .map_err(|error| format!("the store is misconfigured: {error}"))
}

/// The machine's name, for owners and for who forced a release.
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
