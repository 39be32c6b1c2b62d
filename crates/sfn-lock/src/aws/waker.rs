//! [`Wake`] on the Step Functions API: `SendTaskSuccess`, retried by hand.

use std::time::Duration;

use aws_sdk_sfn::error::ProvideErrorMetadata;
use aws_sdk_sfn::error::SdkError;

use crate::ports::wake::{Wake, WakeFuture, WakeOutcome};

/// [`Wake`] on the Step Functions API. Give it a client with the SDK's
/// retries turned off ([`crate::aws::config::waker_client`]): it retries itself,
/// knowing what the SDK cannot. A `SendTaskSuccess` whose first attempt
/// landed is answered `TaskTimedOut` when repeated, the very answer a dead
/// waiter gets; so a closed-task answer after an attempt that may have landed
/// (no answer, a 5xx) is [`WakeOutcome::Unknown`], never `Closed`.
#[derive(Clone, Debug)]
pub struct SfnWaker {
    client: aws_sdk_sfn::Client,
}

impl SfnWaker {
    pub fn new(client: aws_sdk_sfn::Client) -> Self {
        SfnWaker { client }
    }
}

/// The error codes that say the task is closed or never was.
const CLOSED_TASK_ERRORS: &[&str] = &["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"];
/// Answers that say the call was not processed: safe to repeat as they are.
const NOT_PROCESSED_ERRORS: &[&str] = &["ThrottlingException", "KmsThrottlingException"];
/// Attempts per wake-up, and the pause before each repeat.
pub(crate) const WAKE_ATTEMPTS: u32 = 2;
pub(crate) const WAKE_PAUSE: Duration = Duration::from_millis(100);

impl Wake for SfnWaker {
    fn wake<'a>(&'a self, token: &'a str, output: String) -> WakeFuture<'a> {
        Box::pin(async move {
            // Whether an earlier attempt may have completed the task.
            let mut may_have_landed = false;
            let mut last_error = String::new();
            for attempt in 1..=WAKE_ATTEMPTS {
                if attempt > 1 {
                    tokio::time::sleep(WAKE_PAUSE * attempt).await;
                }
                let sent = self
                    .client
                    .send_task_success()
                    .task_token(token)
                    .output(output.clone())
                    .send()
                    .await;
                let failure = match sent {
                    Ok(_) => return WakeOutcome::Woken,
                    Err(error) => error,
                };
                let code = failure.code().map(str::to_owned);
                let server_error = matches!(&failure, SdkError::ServiceError(service)
                    if service.raw().status().is_server_error());
                last_error = format!(
                    "SendTaskSuccess failed: {}",
                    aws_sdk_sfn::error::DisplayErrorContext(&failure)
                );
                match code.as_deref() {
                    Some(code) if CLOSED_TASK_ERRORS.contains(&code) => {
                        return match may_have_landed {
                            false => WakeOutcome::Closed(last_error),
                            true => WakeOutcome::Unknown(format!(
                                "{last_error}, after an attempt that may have woken it"
                            )),
                        };
                    }
                    // Throttled: not processed, worth repeating.
                    Some(code) if NOT_PROCESSED_ERRORS.contains(&code) => {}
                    // Access denied, output refused: repeating changes nothing.
                    Some(_) if !server_error => break,
                    // No answer, or a 5xx: the task may have been completed.
                    _ => may_have_landed = true,
                }
            }
            if !may_have_landed {
                return WakeOutcome::Refused(last_error);
            }
            WakeOutcome::Unknown(last_error)
        })
    }
}
