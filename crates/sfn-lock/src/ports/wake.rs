//! Waking a queued waiter: a release hands it the lock and completes its
//! task token with the grant (DESIGN.md, "Queue"). The Step Functions
//! adapter is `aws::waker`.

use std::future::Future;
use std::pin::Pin;

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
