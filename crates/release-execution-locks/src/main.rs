//! `release-execution-locks`: releases every lock held by a Step Functions
//! execution that ended (ABORTED, TIMED_OUT, FAILED) without releasing it.
//! Fed by EventBridge through a delay queue; all behaviour lives in `sfn-lock`.

use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use sfn_lock::lambda::{handle_sweep, init_logging, store_from_env};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    init_logging();
    let store = store_from_env().await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        handle_sweep(&store, event)
    }))
    .await
}
