//! `release-execution-locks`: releases every lock held by a Step Functions
//! execution that ended (any terminal status) without releasing it.
//! Fed by EventBridge through a delay queue; all behaviour lives in `sfn-lock`.

use lambda_runtime::{service_fn, LambdaEvent};
use sfn_lock::lambda::{handle_sweep, init_logging, sweeper_from_env, Payload};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    init_logging();
    let sweeper = sweeper_from_env().await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Payload>| {
        handle_sweep(&sweeper, event)
    }))
    .await
}
