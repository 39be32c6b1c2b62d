//! The same lock on each store, as `make demo` shows it: two owners, one lock
//! name with `/` and a space in it, on DynamoDB, S3 and SSM Parameter Store.
//! Runs inside scripts/local-stack.sh (moto serves all three):
//!
//!     scripts/local-stack.sh cargo run -q -p sfn-lock --example stores

use sfn_lock::aws::config::sdk_config;
use sfn_lock::{
    AcquireOutcome, AnyStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner, StoreUrl,
};

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let table = std::env::var("SFN_LOCK_TABLE")?;
    let bucket = std::env::var("SFN_LOCK_BUCKET")?;
    let sdk = sdk_config().await;
    let name = LockName::new(format!("customer/42 nightly {}", EpochMillis::now().0))?;
    let (first, second) = (Owner::new("arn:...:run-41")?, Owner::new("arn:...:run-42")?);
    let lease = LeaseSeconds::new("leaseSeconds", 60)?;
    println!(
        "\nthe same lock {:?} on each store (LOCK_STORE_URL):",
        name.as_str()
    );
    for url in [
        format!("dynamodb://{table}"),
        format!("s3://{bucket}/demo/"),
        "ssm:///sfn-lock/demo".to_string(),
    ] {
        let store = AnyStore::from_url(&StoreUrl::parse(&url)?, &sdk)?;
        let now = EpochMillis::now();
        let token = |outcome: &AcquireOutcome| match outcome {
            AcquireOutcome::Granted(lease) => format!("granted, token {}", lease.fencing_token),
            AcquireOutcome::Held(held) => match held.holders.first() {
                Some(holder) => format!("held by {}", holder.owner),
                None => "held".to_string(),
            },
            other => format!("{other:?}"),
        };
        let a = store.acquire(&name, &first, lease, now).await?;
        let b = store.acquire(&name, &second, lease, now).await?;
        let released = store.release(&name, &first, now).await?;
        let b_again = store.acquire(&name, &second, lease, now).await?;
        store.release(&name, &second, now).await?;
        println!(
            "  {url:<28} run-41 {}; run-42 {}; run-41 releases ({released:?}); run-42 {}",
            token(&a),
            token(&b),
            token(&b_again)
        );
    }
    Ok(())
}
