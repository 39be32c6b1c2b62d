//! The AWS plumbing every adapter shares (the SDK configuration, the HTTPS
//! client, the service's clock, what an SDK failure means) and the adapters
//! of the ports that are no store: Step Functions and SQS.

pub mod config;
pub(crate) mod errors;
pub mod executions;
pub mod https;
pub mod service_clock;
pub mod waker;
