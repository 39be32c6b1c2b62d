//! The lock on one DynamoDB item per lock name.
//!
//! Item: `lockName` (partition key), `owner`, `acquiredAt` and `expiresAt`
//! (epoch milliseconds), `fencingToken`, and `ttl` (epoch seconds, garbage
//! collection only). A released lock keeps its item, without `owner`, so the
//! fencing counter survives, and records its last release (`releasedBy`,
//! `releasedToken`, `releaseId`) so that a retried release can tell its own
//! landed write from someone else's grant; `owner` is also the key of the
//! sparse index [`OWNER_INDEX`] that finds every lock an execution still holds.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

pub(crate) use crate::error::classify;
use crate::error::StoreError;
use crate::model::{EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::queue::Wake;
// How items are written and read back: values, the holder, the lease.
use crate::dynamodb_item::{gc_after, holder_from, number, string};
use crate::dynamodb_permits::permit_of;
pub use crate::dynamodb_permits::HOLDER_COUNT;
pub use crate::dynamodb_queue::QUEUE_LENGTH;
use crate::dynamodb_queue::{wake_name, Entry};

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

/// GRANT's assignments; the write that removes expired permits and grants a
/// mutex in the same stroke (`dynamodb_permit_writes.rs`) makes the same ones.
macro_rules! grant_assignments {
    () => {
        "#owner = :owner, #acquiredAt = :acquiredAt, #expiresAt = :expiresAt, #ttl = :ttl, \
         #fencingToken = if_not_exists(#fencingToken, :tokenBase) + :one"
    };
}
pub(crate) use grant_assignments;
/// The lock is free, or its lease ran out. TTL deletes lazily (hours late),
/// so expiry is decided here, never by the item's absence.
///
/// A brand-new item starts its fencing counter at the grant time in
/// microseconds, so the token still rises when TTL deleted the previous item:
/// the old counter stopped at its own start time plus its grant count, and a
/// lock sees far fewer than one grant per microsecond.
/// It also removes a wake marker the owner may have left (a hand-off whose
/// wake-up was owed when the owner released and acquired again): a stale
/// one would have a later pump wake this grant's task behind its back.
pub const GRANT: &str = concat!("SET ", grant_assignments!(), " REMOVE #wake");
/// Room for a mutex grant: no live holder. A semaphore's permits block it,
/// expired or not: an acquire that finds only expired ones removes them first
/// (`dynamodb_permits.rs`).
macro_rules! mutex_room {
    () => {
        "(attribute_not_exists(#owner) OR #expiresAt < :now) \
         AND (attribute_not_exists(#holderCount) OR #holderCount = :zero)"
    };
}
/// Nobody waits in the lock's queue (`dynamodb_queue.rs`): a new acquire
/// never overtakes a waiter; only a hand-off grants while some wait.
macro_rules! queue_empty {
    () => {
        "(attribute_not_exists(#queueLength) OR #queueLength = :zero)"
    };
}
pub(crate) use queue_empty;
pub const GRANT_CONDITION: &str = concat!(mutex_room!(), " AND ", queue_empty!());
/// A hand-off: GRANT for the waiter at the head of the queue, which leaves it,
/// and the marker of an unconfirmed wake-up (`wake:<id>`, the same id), which
/// tells a retry of this very write, and any later pump, that this waiter is
/// owed its `SendTaskSuccess` (`dynamodb_handoff.rs`).
const HAND_OFF: &str = concat!(
    "SET ",
    grant_assignments!(),
    ", #queueLength = #queueLength - :one, #wake = :wake REMOVE #entry"
);
const HAND_OFF_CONDITION: &str = concat!(mutex_room!(), " AND #entry = :seq");

/// Frees the lock and records who released which grant, in the same write.
/// Grants and renewals leave the record alone, so a retried release whose first
/// attempt landed finds it even after another owner got in.
pub const RELEASE: &str = "REMOVE #owner, #acquiredAt, #expiresAt, #wake \
     SET #ttl = :ttl, #releasedBy = :owner, #releasedToken = #fencingToken, #releaseId = :releaseId";
/// The attributes RELEASE names.
pub(crate) const RELEASE_NAMES: &[&str] = &[
    OWNER,
    ACQUIRED_AT,
    EXPIRES_AT,
    TTL,
    RELEASED_BY,
    RELEASED_TOKEN,
    FENCING_TOKEN,
    RELEASE_ID,
];
/// Held by the caller, and not already released by this very call: a retry
/// whose first attempt landed must not free a grant the owner took since.
pub const RELEASE_CONDITION: &str =
    "#owner = :owner AND (attribute_not_exists(#releaseId) OR #releaseId <> :releaseId)";
/// The same, for the sweep: only a grant made before the execution ended.
const RELEASE_GRANTED_BEFORE_CONDITION: &str =
    "#owner = :owner AND (attribute_not_exists(#releaseId) OR #releaseId <> :releaseId) \
     AND #acquiredAt <= :grantedBefore";

/// A grant or renewal races with other writers only when the lock changes hands
/// between our two writes; after this many rounds something is badly wrong.
pub(crate) const MAX_ACQUIRE_ROUNDS: usize = 3;

pub(crate) type Item = HashMap<String, AttributeValue>;
/// A hand-off: the waiter's place, and when it asked (its `enqueuedAt`). The
/// grant records that as its `acquiredAt`: the request it answers was made
/// then, so the sweep of an execution that ended while queued releases it
/// (its guard keeps only grants asked for after the end, by a redrive). And
/// the nonce of its wake marker (`dynamodb_queue.rs`, WAKE_PREFIX).
pub(crate) type HandOff<'a> = (&'a Entry, EpochMillis, &'a str);
/// A release's answer and the lock's item after it (or as found); `None`
/// when there is no item.
pub(crate) type Released = (ReleaseOutcome, Option<Item>);

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

    /// A mutex grant; with `hand_off`, the hand-off to that waiter, whose
    /// grant dates from its request (see [`HandOff`]).
    pub(crate) async fn grant(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        expires_at: EpochMillis,
        now: EpochMillis,
        hand_off: Option<HandOff<'_>>,
    ) -> Result<Item, WriteFailure> {
        let mut write = match hand_off {
            None => Write::new(GRANT, GRANT_CONDITION)
                .name_as("#wake", &wake_name(lock_name, owner))
                .value(":acquiredAt", number(now.0)),
            Some((entry, requested_at, nonce)) => Write::new(HAND_OFF, HAND_OFF_CONDITION)
                .name_as("#entry", &entry.name)
                .name_as("#wake", &entry.wake_name())
                .value(":wake", string(&entry.fresh_wake(nonce)))
                .value(":seq", number(entry.seq))
                .value(":acquiredAt", number(requested_at.0)),
        };
        write = write
            .names(&[
                OWNER,
                ACQUIRED_AT,
                EXPIRES_AT,
                TTL,
                FENCING_TOKEN,
                HOLDER_COUNT,
                QUEUE_LENGTH,
            ])
            .value(":owner", string(owner.as_str()))
            .value(":now", number(now.0))
            .value(":expiresAt", number(expires_at.0))
            .value(":ttl", number(gc_after(expires_at)))
            .value(":tokenBase", number(token_base(now)))
            .value(":one", number(1))
            .value(":zero", number(0));
        self.conditional_update(lock_name.as_str(), write).await
    }

    /// The mutex-format release, optionally only of a grant made at or before
    /// `granted_before`. `Ok(None)`: the caller holds a permit instead. The item comes
    /// back (after the write, or as found) for the queue's sake.
    pub(crate) async fn release_mutex(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        release_id: &str,
        granted_before: Option<EpochMillis>,
        now: EpochMillis,
    ) -> Result<Option<Released>, StoreError> {
        let condition = match granted_before {
            None => RELEASE_CONDITION,
            Some(_) => RELEASE_GRANTED_BEFORE_CONDITION,
        };
        let mut write = Write::new(RELEASE, condition)
            .names(RELEASE_NAMES)
            .name_as("#wake", &wake_name(lock_name, owner))
            .value(":owner", string(owner.as_str()))
            .value(":ttl", number(gc_after(now)))
            .value(":releaseId", string(release_id));
        if let Some(bound) = granted_before {
            write = write.value(":grantedBefore", number(bound.0));
        }
        let old_item = match self.conditional_update(lock_name.as_str(), write).await {
            Ok(item) => return Ok(Some((ReleaseOutcome::Released, Some(item)))),
            Err(WriteFailure::Store(error)) => return Err(error),
            Err(WriteFailure::ConditionFailed(None)) => {
                return Ok(Some((ReleaseOutcome::NotHeld, None)))
            }
            Err(WriteFailure::ConditionFailed(Some(item))) => item,
        };
        let outcome = if released_by_this_call(&old_item, release_id) {
            // An earlier attempt of this very call freed the lock; whoever
            // holds it now got it afterwards, with no overlap.
            ReleaseOutcome::Released
        } else if old_item.contains_key(OWNER) {
            ReleaseOutcome::HeldByOther(holder_from(Some(&old_item))?)
        } else if permit_of(&old_item, owner)?.is_some() {
            return Ok(None);
        } else {
            ReleaseOutcome::NotHeld
        };
        Ok(Some((outcome, Some(old_item))))
    }
}

/// A brand-new item's first token: the grant time in microseconds (see [`GRANT`]).
pub(crate) fn token_base(now: EpochMillis) -> i64 {
    now.0.saturating_mul(1000)
}

/// Whether the item's release record is this call's own (an earlier attempt
/// of it landed and its answer was lost).
pub(crate) fn released_by_this_call(item: &Item, release_id: &str) -> bool {
    item.get(RELEASE_ID)
        .and_then(|value| value.as_s().ok())
        .is_some_and(|id| id == release_id)
}
