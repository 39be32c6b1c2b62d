//! The lock's table: its attribute names, the item, the one conditional
//! `UpdateItem` every write goes through, and the store itself. The writes'
//! conditions live beside their logic: `grant.rs` (the mutex), `permit_writes.rs`
//! (a semaphore), `queue.rs` and `handoff.rs` (the queue).

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

use crate::aws::errors::classify;
use crate::ports::wake::Wake;
use crate::vocab::error::StoreError;

pub const LOCK_NAME: &str = "lockName";
pub const OWNER: &str = "owner";
pub const ACQUIRED_AT: &str = "acquiredAt";
pub const EXPIRES_AT: &str = "expiresAt";
pub const FENCING_TOKEN: &str = "fencingToken";
pub const TTL: &str = "ttl";
/// The owner whose release last freed the lock.
pub const RELEASED_BY: &str = "releasedBy";
/// The fencing token of the grant that release ended.
pub const RELEASED_TOKEN: &str = "releasedToken";
/// Names the one release call that wrote it; the SDK's retries of that call
/// send the same value.
pub const RELEASE_ID: &str = "releaseId";
/// Global secondary index: partition key `owner`, keys only.
pub const OWNER_INDEX: &str = "owner-index";
/// Locks per page of an owner-index query. DynamoDB's own page is 1 MB (thousands
/// of keys); a smaller one keeps each answer small and lets the paging be tested.
pub const OWNER_QUERY_PAGE_SIZE: i32 = 100;

/// How long an item outlives its last lease before TTL may delete it. Long
/// enough that clock skew between writers cannot break fencing order after a
/// deletion (see [`GRANT`]).
pub const TTL_GRACE_SECONDS: u32 = 86_400;

/// A grant or renewal races with other writers only when the lock changes hands
/// between our two writes; after this many rounds something is badly wrong.
pub(crate) const MAX_ACQUIRE_ROUNDS: usize = 3;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) enum WriteFailure {
    /// The condition did not hold; the item as it was (absent if there was none).
    ConditionFailed(Option<Item>),
    Store(StoreError),
}

/// One conditional `UpdateItem`: its expressions, and what their
/// `#placeholders` and `:placeholders` stand for.
pub(crate) struct Write {
    pub(crate) update: String,
    pub(crate) condition: String,
    pub(crate) names: Vec<(String, String)>,
    pub(crate) values: Vec<(String, AttributeValue)>,
}

impl Write {
    pub(crate) fn new(update: impl Into<String>, condition: impl Into<String>) -> Self {
        Write {
            update: update.into(),
            condition: condition.into(),
            names: Vec::new(),
            values: Vec::new(),
        }
    }

    /// `#name` stands for `name`.
    pub(crate) fn names(mut self, names: &[&str]) -> Self {
        for name in names {
            self.names.push((format!("#{name}"), (*name).to_owned()));
        }
        self
    }

    /// `placeholder` (`#p0`) stands for `name`: an attribute named by data.
    pub(crate) fn name_as(mut self, placeholder: &str, name: &str) -> Self {
        self.names.push((placeholder.to_owned(), name.to_owned()));
        self
    }

    pub(crate) fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        self.values.push((placeholder.to_owned(), value));
        self
    }

    /// Drops the placeholders neither expression uses (DynamoDB refuses
    /// unused ones), for writes whose expressions are assembled from parts.
    pub(crate) fn without_unused(mut self) -> Self {
        let text = format!("{} {}", self.update, self.condition);
        let used = |placeholder: &str| {
            text.match_indices(placeholder).any(|(at, _)| {
                !text[at + placeholder.len()..]
                    .starts_with(|next: char| next.is_ascii_alphanumeric() || next == '_')
            })
        };
        self.names.retain(|(placeholder, _)| used(placeholder));
        self.values.retain(|(placeholder, _)| used(placeholder));
        self
    }
}

/// A [`LockStore`] on one DynamoDB table.
#[derive(Clone, Debug)]
pub struct DynamoStore {
    pub(crate) client: Client,
    pub(crate) table_name: String,
    /// Wakes queued waiters; without one, a release cannot hand the lock over.
    pub(crate) waker: Option<Arc<dyn Wake>>,
}

impl DynamoStore {
    pub fn new(client: Client, table_name: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table_name: table_name.into(),
            waker: None,
        }
    }

    /// The same store, able to hand the lock to queued waiters.
    pub fn with_waker(mut self, waker: Arc<dyn Wake>) -> Self {
        self.waker = Some(waker);
        self
    }

    pub(crate) async fn conditional_update(
        &self,
        key: &str,
        write: Write,
    ) -> Result<Item, WriteFailure> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, AttributeValue::S(key.to_owned()))
            .update_expression(write.update)
            .condition_expression(write.condition)
            .set_expression_attribute_names(Some(write.names.into_iter().collect()))
            .set_expression_attribute_values(Some(write.values.into_iter().collect()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match request.send().await {
            Ok(output) => Ok(output.attributes.unwrap_or_default()),
            Err(SdkError::ServiceError(failure))
                if matches!(
                    failure.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                let old_item = match failure.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(error) => error.item,
                    _ => None,
                };
                Err(WriteFailure::ConditionFailed(old_item))
            }
            Err(error) => Err(WriteFailure::Store(classify("UpdateItem", error))),
        }
    }
}
