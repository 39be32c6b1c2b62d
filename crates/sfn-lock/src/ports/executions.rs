//! What the sweep asks Step Functions before it frees a lock, and where it
//! puts an event it must look at again later (the adapters: `aws::executions`).
//!
//! The sweep trusts Step Functions, never the message: anyone who can send to
//! the cleanup queue or invoke the function could make up an "ended" event, and
//! a redriven execution runs again under the same ARN. So every release is
//! preceded by a `DescribeExecution` of the owner.

use std::future::Future;

use crate::vocab::error::StoreError;
use crate::vocab::model::EpochMillis;

/// An execution's status as far as the sweep cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionStatus {
    /// Running, or pending a redrive: it may hold its locks legitimately.
    Live,
    /// SUCCEEDED, FAILED, TIMED_OUT or ABORTED.
    Ended,
}

/// The facts about one execution that decide whether its locks may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionFacts {
    pub state_machine_arn: String,
    pub status: ExecutionStatus,
    /// When it (last) ended; a redriven execution that ended again has a later one.
    pub stop_date: Option<EpochMillis>,
    pub redrive_count: u32,
}

/// Step Functions, as the sweep uses it.
pub trait Executions: Send + Sync {
    /// The execution's facts, or `None` if Step Functions knows no such execution.
    fn describe(
        &self,
        execution_arn: &str,
    ) -> impl Future<Output = Result<Option<ExecutionFacts>, StoreError>> + Send;

    /// Stops a running execution (a no-op for one that has ended).
    fn stop(
        &self,
        execution_arn: &str,
        cause: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Where an event goes to be looked at again after a delay.
pub trait Requeue: Send + Sync {
    /// Sends `body` back to the cleanup queue, visible after `delay_seconds` (at most 900).
    fn requeue(
        &self,
        body: &str,
        delay_seconds: u32,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// SQS allows at most 15 minutes of delay per message.
pub const MAX_REQUEUE_DELAY_SECONDS: u32 = 900;
