//! The fair queue's store-independent parts: the task token a waiter sleeps
//! on, and waking it with `SendTaskSuccess`.
//!
//! A queued acquire returns at once; its Step Functions task waits on the
//! token until a release hands it the lock and completes the token with the
//! grant (DESIGN.md, "Queue").

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use aws_sdk_sfn::error::ProvideErrorMetadata;
use aws_sdk_sfn::error::SdkError;

use crate::error::LockError;

/// Step Functions' documented maximum token length.
pub const MAX_TASK_TOKEN_BYTES: usize = 2048;

/// A `.waitForTaskToken` task's token (`$$.Task.Token`): 1 to 2048 bytes,
/// no control characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskToken(String);

impl TaskToken {
    pub fn new(value: impl Into<String>) -> Result<Self, LockError> {
        let value = value.into();
        if value.is_empty() || value.len() > MAX_TASK_TOKEN_BYTES {
            return Err(LockError::invalid(
                "taskToken",
                format!(
                    "must be 1 to {MAX_TASK_TOKEN_BYTES} bytes long (got {} bytes)",
                    value.len()
                ),
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(LockError::invalid(
                "taskToken",
                "must not contain control characters",
            ));
        }
        Ok(TaskToken(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What became of one `SendTaskSuccess`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WakeOutcome {
    /// The task took the output: the waiter runs now.
    Woken,
    /// Step Functions answered that the task is closed (it timed out, its
    /// execution stopped, or it completed before) or never existed, and no
    /// earlier attempt of ours may have completed it: the waiter never ran.
    Closed(String),
    /// Every attempt was answered "not processed" (throttled, access denied,
    /// output refused): the task is as it was, still waiting.
    Refused(String),
    /// No answer, or a 5xx, on some attempt: the waiter may or may not run.
    /// Nothing may be undone on this.
    Unknown(String),
}

pub type WakeFuture<'a> = Pin<Box<dyn Future<Output = WakeOutcome> + Send + 'a>>;

/// Completes a waiter's task with its grant.
pub trait Wake: Send + Sync + std::fmt::Debug {
    fn wake<'a>(&'a self, token: &'a str, output: String) -> WakeFuture<'a>;
}

/// [`Wake`] on the Step Functions API. Give it a client with the SDK's
/// retries turned off ([`crate::lambda::waker_client`]): it retries itself,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bounded_and_printable() {
        assert!(TaskToken::new("AQCEAAAAKgAAAA").is_ok());
        assert!(TaskToken::new("x".repeat(2048)).is_ok());
        for bad in [String::new(), "x".repeat(2049), "a\nb".to_owned()] {
            assert!(
                matches!(TaskToken::new(bad.clone()), Err(LockError::InvalidRequest { field, .. }) if field == "taskToken"),
                "{bad:?}"
            );
        }
    }
}
