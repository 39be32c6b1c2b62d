//! Every store call of an invocation ends before the invocation's own deadline.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::vocab::error::StoreError;

tokio::task_local! {
    /// When the work [`within`] runs must be done, for the parts of it that
    /// choose whether to start one more step (a hand-off) rather than be cut
    /// in the middle of it.
    static DEADLINE: Instant;
}

/// Time left before the current call's deadline; `None` outside [`within`].
pub(crate) fn time_left() -> Option<Duration> {
    DEADLINE
        .try_with(|deadline| deadline.saturating_duration_since(Instant::now()))
        .ok()
}

/// Time kept back from the invocation's deadline to answer in.
pub(crate) const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// Runs `work` but answers `LockStoreUnavailable` once `budget` (from
/// [`budget`]) has passed, before the Lambda timeout would: the SDK's timeouts
/// times its attempts (times acquire's rounds) may exceed the function's
/// `Timeout`, and a timed-out function gives Step Functions `Sandbox.Timedout`
/// (`Lambda.Unknown` on older runtimes), which says nothing about the lock. A
/// write cut short may have landed: the caller treats this answer as "maybe",
/// as it treats every `LockStoreUnavailable` (a retry by the same owner is
/// safe). No budget: the work runs unbounded.
pub(crate) async fn within_budget<T, E: From<StoreError>>(
    budget: Option<Duration>,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match budget {
        None => work.await,
        Some(budget) => within(budget, work).await,
    }
}

/// How long the invocation may still work, keeping time to answer, from its
/// deadline in milliseconds since the epoch (the Lambda context's). `None`
/// for a deadline already past, which is none we can keep (`cargo lambda
/// watch` sends a duration, not an instant): the work then runs unbounded.
pub(crate) fn budget(deadline_millis: u64) -> Option<Duration> {
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_millis);
    let remaining = deadline.duration_since(SystemTime::now()).ok()?;
    Some(remaining.saturating_sub(ANSWER_MARGIN))
}

/// `work`'s output, or `None` once `budget` has passed; inside, [`time_left`]
/// tells the work how much of it remains.
pub(crate) async fn scoped<F: std::future::Future>(budget: Duration, work: F) -> Option<F::Output> {
    let deadline = Instant::now() + budget;
    DEADLINE
        .scope(deadline, tokio::time::timeout_at(deadline, work))
        .await
        .ok()
}

/// `work`, or the store's silence (`LockStoreUnavailable`, a "maybe") once
/// `budget` has passed. Silent: the caller logs its decision once, with the
/// lock it is about, and this error's detail says the budget cut the call.
pub(crate) async fn within<T, E: From<StoreError>>(
    budget: Duration,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match scoped(budget, work).await {
        Some(result) => result,
        None => Err(StoreError::Unavailable(format!(
            "the store did not answer within the function's time budget ({} ms)",
            budget.as_millis()
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::error::LockError;

    fn context_with_deadline(deadline: SystemTime) -> u64 {
        deadline
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64)
    }

    #[tokio::test]
    async fn a_store_call_gives_up_before_the_invocation_deadline() {
        let soon = context_with_deadline(SystemTime::now() + Duration::from_millis(600));
        let hung = within_budget(
            budget(soon),
            std::future::pending::<Result<(), LockError>>(),
        )
        .await;
        assert!(
            matches!(hung, Err(LockError::StoreUnavailable { .. })),
            "{hung:?}"
        );
        let answered = within_budget(budget(soon), async { Ok::<_, LockError>(7) }).await;
        assert_eq!(answered, Ok(7));
        // A deadline in the past (cargo lambda watch sends 600000) bounds nothing.
        let past = context_with_deadline(UNIX_EPOCH + Duration::from_millis(600_000));
        assert_eq!(
            within_budget(budget(past), async { Ok::<_, LockError>(8) }).await,
            Ok(8)
        );
    }

    #[tokio::test]
    async fn the_work_sees_the_time_it_has_left() {
        assert_eq!(time_left(), None, "no deadline outside a bounded call");
        let seen = within(Duration::from_secs(30), async {
            Ok::<_, LockError>(time_left())
        })
        .await
        .ok()
        .flatten();
        let left = seen.map(|left| left.as_secs());
        assert!(matches!(left, Some(29 | 30)), "{left:?}");
    }
}
