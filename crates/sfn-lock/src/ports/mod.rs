//! What the services need from the world outside, as traits and values: the
//! lock store's contract, waking a queued waiter, what Step Functions says
//! about an execution, the pace of a listing. Adapters implement them:
//! `store/` (the stores), `aws/` (Step Functions, SQS).

pub mod executions;
pub mod listing_pace;
pub(crate) mod store;
pub mod wake;
