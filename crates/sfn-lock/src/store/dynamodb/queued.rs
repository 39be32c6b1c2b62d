//! A queued acquire on DynamoDB, and leaving the queue (DESIGN.md, "Queue").

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use tracing::{info, warn};

use crate::aws::errors::classify;
use crate::ports::wake::WakeOutcome;
use crate::store::dynamodb::item::string;
use crate::store::dynamodb::permits::check_fits;
use crate::store::dynamodb::queue::{
    entry_name, grant_output, position_of, queue_length, queue_of, Entry, MAX_QUEUE, TASK_TOKEN,
};
use crate::store::dynamodb::table::{DynamoStore, Item, WriteFailure, LOCK_NAME};
use crate::vocab::error::StoreError;
use crate::vocab::model::{
    AcquireOutcome, Contention, EpochMillis, Lease, LockName, Outcome, Owner,
};
use crate::vocab::request::{LeaseSeconds, Limit, Waiting};

/// How an acquire's rounds ended.
pub(crate) enum Core {
    Done(AcquireOutcome),
    /// The caller's own pass over the queue handed the lock to the caller
    /// itself (it was queued already) and woke its task.
    HandedToCaller(Lease),
}

impl DynamoStore {
    /// [`crate::LockStore::acquire_or_queue`]: the waiter item first, then the
    /// rounds; a grant or renewal made here wakes the caller's task here.
    pub(crate) async fn acquire_queued(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        waiting: &Waiting,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        let token = &waiting.token;
        if !limit.is_mutex() {
            check_fits(owner)?;
        }
        let Some(waker) = self.waker.clone() else {
            return Err(StoreError::Misconfigured(
                "a queued acquire needs a Step Functions client to wake its task".into(),
            ));
        };
        self.put_waiter(lock_name, owner, token, (lease, limit, waiting.wait), now)
            .await?;
        let (granted, outcome) = match self
            .acquire_core(lock_name, owner, lease, limit, true, now)
            .await?
        {
            Core::HandedToCaller(lease) => return Ok(AcquireOutcome::Granted(lease)),
            Core::Done(AcquireOutcome::Granted(lease)) => (true, lease),
            Core::Done(AcquireOutcome::Renewed(lease)) => (false, lease),
            Core::Done(other) => return Ok(other),
        };
        let output = grant_output(
            &outcome,
            lease,
            limit,
            if granted {
                Outcome::Granted
            } else {
                Outcome::Renewed
            },
        );
        let (name, who) = (lock_name.as_str(), owner.as_str());
        match waker.wake(token.as_str(), output).await {
            WakeOutcome::Woken if granted => Ok(AcquireOutcome::Granted(outcome)),
            WakeOutcome::Woken => Ok(AcquireOutcome::Renewed(outcome)),
            WakeOutcome::Closed(detail) if granted => {
                // Nobody else could have woken this task for a grant made
                // here: nobody runs under it.
                warn!(
                    lock_name = name,
                    owner = who,
                    error = detail,
                    "the caller's task had ended before its grant; taking it back"
                );
                if let Some(item) = self.take_back(lock_name, &outcome, limit, None).await? {
                    if queue_length(&item)? > 0 {
                        Box::pin(self.pump(lock_name, item, now)).await?;
                    }
                }
                Err(closed_task(detail))
            }
            WakeOutcome::Closed(detail) => {
                // A renewed grant may have been handed over and its task woken
                // by that hand-off: it runs, so the grant stays.
                info!(
                    lock_name = name,
                    owner = who,
                    error = detail,
                    "renewed a grant whose task was already completed; it stays"
                );
                Err(closed_task(detail))
            }
            WakeOutcome::Unknown(detail) | WakeOutcome::Refused(detail) => {
                Err(StoreError::Unavailable(format!(
                    "the grant is made, but waking the task failed ({detail}); \
                 a retried acquire renews it and wakes the task again"
                )))
            }
        }
    }

    /// Joins the queue behind a refusal; `None`: the lock changed, go on deciding.
    pub(crate) async fn join_queue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        contention: Contention,
        now: EpochMillis,
    ) -> Result<Option<AcquireOutcome>, StoreError> {
        let name = lock_name.as_str();
        let entry = entry_name(lock_name, owner);
        let item = match self.enqueue(lock_name, owner, limit, now).await {
            Ok(item) => item,
            Err(WriteFailure::Store(error)) => return Err(error),
            Err(WriteFailure::ConditionFailed(None)) => return Ok(None),
            Err(WriteFailure::ConditionFailed(Some(item))) => {
                if let Some(position) = position_of(&item, &entry)? {
                    // A retried acquire: its place stands, its waiter item
                    // now names the new task token.
                    return Ok(Some(AcquireOutcome::Queued { position }));
                }
                if queue_length(&item)? >= MAX_QUEUE && !contention.holders.is_empty() {
                    warn!(
                        lock_name = name,
                        owner = owner.as_str(),
                        max_queue = MAX_QUEUE,
                        "the queue is full; refused as contended"
                    );
                    return Ok(Some(AcquireOutcome::Held(contention)));
                }
                return Ok(None);
            }
        };
        let position = position_of(&item, &entry)?.unwrap_or(u32::MAX);
        Ok(Some(AcquireOutcome::Queued { position }))
    }

    /// Takes `owner` out of the queue, if it waits there; with
    /// `granted_before` (the sweep), only a place taken before then: a
    /// redriven execution's later one stays. The item after, or as found.
    pub(crate) async fn leave_queue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        item: Item,
        granted_before: Option<EpochMillis>,
    ) -> Result<Option<Item>, StoreError> {
        let name = entry_name(lock_name, owner);
        let Some(entry) = queue_of(&item)?
            .into_iter()
            .find(|entry| entry.name == name)
        else {
            return Ok(Some(item));
        };
        if let Some(bound) = granted_before {
            let waiter = self.read_waiter(&entry).await?;
            if waiter.is_some_and(|waiter| waiter.enqueued_at > bound) {
                return Ok(Some(item));
            }
        }
        match self.drop_entry(lock_name, &entry).await {
            Ok(after) => {
                info!(
                    lock_name = lock_name.as_str(),
                    owner = owner.as_str(),
                    "left the queue"
                );
                self.delete_waiter(&entry, None).await;
                Ok(Some(after))
            }
            Err(WriteFailure::ConditionFailed(found)) => Ok(found),
            Err(WriteFailure::Store(error)) => Err(error),
        }
    }

    /// After leaving the queue or being woken; one left behind costs the
    /// sweep a read.
    /// With `token`, only while the item still names that task: the same
    /// owner may have queued again meanwhile, with a token of its own.
    pub(crate) async fn delete_waiter(&self, entry: &Entry, token: Option<&str>) {
        let mut request = self
            .client
            .delete_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(&entry.waiter_key()));
        if let Some(token) = token {
            request = request
                .condition_expression("#taskToken = :taskToken")
                .expression_attribute_names("#taskToken", TASK_TOKEN)
                .expression_attribute_values(":taskToken", string(token));
        }
        match request.send().await {
            Ok(_) => {}
            Err(SdkError::ServiceError(failure))
                if matches!(
                    failure.err(),
                    DeleteItemError::ConditionalCheckFailedException(_)
                ) => {}
            Err(error) => {
                let error = classify("DeleteItem", error);
                warn!(%error, "the waiter item stays until TTL");
            }
        }
    }
}

fn closed_task(detail: String) -> StoreError {
    StoreError::Refused {
        field: "taskToken".into(),
        rule: format!("names a task that has already ended ({detail})"),
    }
}
