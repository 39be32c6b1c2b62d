//! `release-lock`: the Lambda function Step Functions calls to release a lock.
//! All behaviour lives in the `sfn-lock` library; this sets it up once per cold start.

use lambda_runtime::{service_fn, LambdaEvent};
use sfn_lock::lambda::{handle_release, init_logging, locker_from_env, Payload};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    init_logging();
    let locker = locker_from_env().await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Payload>| {
        handle_release(&locker, event)
    }))
    .await
}
