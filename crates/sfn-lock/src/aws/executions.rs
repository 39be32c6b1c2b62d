//! The sweep's ports on AWS: [`Executions`] on Step Functions, [`Requeue`]
//! on the cleanup queue (SQS).

use aws_sdk_sfn::error::ProvideErrorMetadata;
use aws_sdk_sfn::operation::describe_execution::DescribeExecutionError;
use aws_sdk_sfn::types::ExecutionStatus as SfnStatus;

use crate::aws::errors::classify;
use crate::ports::executions::{
    ExecutionFacts, ExecutionStatus, Executions, Requeue, MAX_REQUEUE_DELAY_SECONDS,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::EpochMillis;

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
