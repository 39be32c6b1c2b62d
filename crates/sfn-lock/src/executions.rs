//! What the sweep asks Step Functions before it frees a lock, and where it
//! puts an event it must look at again later.
//!
//! The sweep trusts Step Functions, never the message: anyone who can send to
//! the cleanup queue or invoke the function could make up an "ended" event, and
//! a redriven execution runs again under the same ARN. So every release is
//! preceded by a `DescribeExecution` of the owner.

use std::future::Future;

use aws_sdk_sfn::error::ProvideErrorMetadata;
use aws_sdk_sfn::operation::describe_execution::DescribeExecutionError;
use aws_sdk_sfn::types::ExecutionStatus as SfnStatus;
use sha2::{Digest, Sha256};

use crate::dynamodb::classify;
use crate::error::StoreError;
use crate::model::EpochMillis;

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

/// The child execution the attach variant starts for `parent_execution_arn`.
/// The ASL names it `States.Format('{}-{}', States.Hash($$.Execution.Id,
/// 'SHA-256'), $$.Execution.RedriveCount)`, so the sweep can find it without
/// reading the parent's history. `None` if `target_state_machine_arn` is not a
/// state machine ARN.
pub fn child_execution_arn(
    target_state_machine_arn: &str,
    parent_execution_arn: &str,
    parent_redrive_count: u32,
) -> Option<String> {
    let (prefix, name) = target_state_machine_arn.split_once(":stateMachine:")?;
    let digest = Sha256::digest(parent_execution_arn.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    Some(format!(
        "{prefix}:execution:{name}:{hex}-{parent_redrive_count}"
    ))
}

/// [`Executions`] on the Step Functions API.
#[derive(Clone, Debug)]
pub struct StepFunctions {
    client: aws_sdk_sfn::Client,
}

impl StepFunctions {
    pub fn new(client: aws_sdk_sfn::Client) -> Self {
        StepFunctions { client }
    }
}

impl Executions for StepFunctions {
    async fn describe(&self, execution_arn: &str) -> Result<Option<ExecutionFacts>, StoreError> {
        let output = match self
            .client
            .describe_execution()
            .execution_arn(execution_arn)
            .send()
            .await
        {
            Ok(output) => output,
            Err(error)
                if matches!(
                    error.as_service_error(),
                    Some(DescribeExecutionError::ExecutionDoesNotExist(_))
                ) =>
            {
                return Ok(None)
            }
            Err(error) => return Err(classify("DescribeExecution", error)),
        };
        let status = match output.status() {
            SfnStatus::Succeeded | SfnStatus::Failed | SfnStatus::TimedOut | SfnStatus::Aborted => {
                ExecutionStatus::Ended
            }
            // RUNNING, PENDING_REDRIVE and any status added later: not provably over.
            _ => ExecutionStatus::Live,
        };
        Ok(Some(ExecutionFacts {
            state_machine_arn: output.state_machine_arn().to_owned(),
            status,
            stop_date: output
                .stop_date()
                .and_then(|date| date.to_millis().ok())
                .map(EpochMillis),
            redrive_count: output
                .redrive_count()
                .and_then(|count| u32::try_from(count).ok())
                .unwrap_or(0),
        }))
    }

    async fn stop(&self, execution_arn: &str, cause: &str) -> Result<(), StoreError> {
        match self
            .client
            .stop_execution()
            .execution_arn(execution_arn)
            .error("sfn-lock.ParentExecutionEnded")
            .cause(cause)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // It ended (or vanished) between our look and the stop: nothing to stop.
            Err(error) if error.code() == Some("ExecutionDoesNotExist") => Ok(()),
            Err(error) => Err(classify("StopExecution", error)),
        }
    }
}

/// [`Requeue`] on the cleanup queue.
#[derive(Clone, Debug)]
pub struct SqsRequeue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsRequeue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        SqsRequeue {
            client,
            queue_url: queue_url.into(),
        }
    }
}

impl Requeue for SqsRequeue {
    async fn requeue(&self, body: &str, delay_seconds: u32) -> Result<(), StoreError> {
        let delay = delay_seconds.min(MAX_REQUEUE_DELAY_SECONDS);
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(i32::try_from(delay).unwrap_or(900))
            .send()
            .await
            .map(|_| ())
            .map_err(|error| classify("SendMessage", error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_is_named_as_the_asl_names_it() {
        let target = "arn:aws:states:us-east-1:123456789012:stateMachine:nightly.etl";
        let parent = "arn:aws:states:us-east-1:123456789012:execution:locked:run-1";
        let child = child_execution_arn(target, parent, 2).unwrap();
        let (prefix, suffix) = child.rsplit_once(':').unwrap();
        assert_eq!(
            prefix,
            "arn:aws:states:us-east-1:123456789012:execution:nightly.etl"
        );
        let (hash, redrives) = suffix.split_once('-').unwrap();
        assert_eq!(redrives, "2");
        assert_eq!(hash.len(), 64);
        assert!(hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        // sha256("abc"), the FIPS 180-2 test vector: the same digest States.Hash gives.
        let abc = child_execution_arn(target, "abc", 0).unwrap();
        assert!(
            abc.ends_with(":ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad-0")
        );
        assert_eq!(child_execution_arn("not-an-arn", parent, 0), None);
    }

    #[test]
    fn the_child_is_in_the_targets_partition_and_region() {
        for (partition, region) in [("aws-cn", "cn-north-1"), ("aws-us-gov", "us-gov-west-1")] {
            let target = format!("arn:{partition}:states:{region}:123456789012:stateMachine:etl");
            let parent =
                format!("arn:{partition}:states:{region}:123456789012:execution:locked:run");
            let child = child_execution_arn(&target, &parent, 0).unwrap();
            let prefix = format!("arn:{partition}:states:{region}:123456789012:execution:etl:");
            assert!(child.starts_with(&prefix), "{child}");
            assert!(child.ends_with("-0"), "{child}");
        }
    }
}
