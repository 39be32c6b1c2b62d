//! The floor of a warm invoke through the Runtime API: a Rust Lambda function
//! on the same runtime crate and tokio flavour as acquire-lock that answers
//! with its event and does nothing else.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}
