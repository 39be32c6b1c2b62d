//! The task token a queued waiter's `.waitForTaskToken` state sleeps on
//! (DESIGN.md, "Queue").

use crate::vocab::error::LockError;

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
