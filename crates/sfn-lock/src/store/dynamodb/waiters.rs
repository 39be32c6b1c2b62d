//! A queued caller's own items: its waiter (owner, task token, limit, lease)
//! and its place in the lock's queue, each written by one conditional write.

use crate::aws::errors::classify;
use crate::store::dynamodb::item::{gc_after, malformed, number, read_number, read_string, string};
use crate::store::dynamodb::permits::HOLDER_COUNT;
use crate::store::dynamodb::permits::PERMIT_OF;
use crate::store::dynamodb::queue::{
    entry_name, waiter_id, Entry, Waiter, ENQUEUED_AT, LEASE_SECONDS, LIMIT, MAX_QUEUE,
    QUEUE_LENGTH, QUEUE_SEQ, TASK_TOKEN, WAITER_PREFIX,
};
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, EXPIRES_AT, LOCK_NAME, OWNER, TTL,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner, MAX_LEASE_SECONDS};
use crate::vocab::request::{LeaseSeconds, Limit, WaitBound};
use crate::vocab::task_token::TaskToken;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;

/// Joins the queue: the next sequence number (both operands read the old
/// counter, so the entry and the counter get the same value).
const ENQUEUE: &str = "SET #entry = if_not_exists(#queueSeq, :zero) + :one, \
     #queueSeq = if_not_exists(#queueSeq, :zero) + :one, \
     #queueLength = if_not_exists(#queueLength, :zero) + :one";
/// Not queued yet, room in the queue, and at this very write either the lock
/// full for the caller's limit or others waiting: a release that empties
/// the lock first fails it, so the caller grants instead of sleeping with
/// nobody to wake it. Behind other waiters the caller is woken in turn: a
/// lock freed while some wait is handed on by whoever freed it.
const ENQUEUE_CONDITION: &str = "attribute_not_exists(#entry) \
     AND (attribute_not_exists(#queueLength) OR #queueLength < :maxQueue) \
     AND ((attribute_exists(#owner) AND #expiresAt >= :now) OR #holderCount >= :limit \
          OR #queueLength > :zero)";
/// A waiter item is rewritten only by a later attempt: an older one still
/// running (a Lambda service error does not stop it) must not put back its
/// dead token over a newer attempt's. Attempts of one task are separated by
/// the older one's failure, far more than the clocks of two hosts differ.
const NEWER_WAITER: &str = "attribute_not_exists(#enqueuedAt) OR #enqueuedAt <= :now";
/// Leaves the queue: only that very entry (a retried acquire may have taken a
/// new place since).
const DROP_ENTRY: &str = "REMOVE #entry SET #queueLength = #queueLength - :one";
const DROP_ENTRY_CONDITION: &str = "#entry = :seq";

impl DynamoStore {
    /// Written before a queued acquire's first write, so that no entry is
    /// ever without its waiter (a hand-off reading none drops the entry).
    /// Rewritten by a retried acquire: its task has a new token
    /// ([`NEWER_WAITER`]).
    pub(crate) async fn put_waiter(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        token: &TaskToken,
        (lease, limit, wait): (LeaseSeconds, Limit, Option<WaitBound>),
        now: EpochMillis,
    ) -> Result<(), StoreError> {
        let key = format!("{WAITER_PREFIX}{}", waiter_id(lock_name, owner));
        // Kept as long as the wait and then the lease can last, no longer: a
        // woken waiter's item is deleted at once, and a waiter without a
        // bound (no maxWaitSeconds) waits at most a year.
        let wait_ends = match wait {
            Some(wait) => wait.started_at.plus_seconds(wait.max_wait_seconds).max(now),
            None => now.plus_seconds(MAX_LEASE_SECONDS),
        };
        let written = self
            .client
            .put_item()
            .table_name(&self.table_name)
            .item(LOCK_NAME, string(&key))
            .item(OWNER, string(owner.as_str()))
            .item(PERMIT_OF, string(lock_name.as_str()))
            .item(TASK_TOKEN, string(token.as_str()))
            .item(ENQUEUED_AT, number(now.0))
            .item(LEASE_SECONDS, number(lease.get()))
            .item(LIMIT, number(limit.get()))
            .item(TTL, number(gc_after(wait_ends.plus_seconds(lease.get()))))
            .condition_expression(NEWER_WAITER)
            .expression_attribute_names("#enqueuedAt", ENQUEUED_AT)
            .expression_attribute_values(":now", number(now.0))
            .send()
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(failure))
                if matches!(
                    failure.err(),
                    PutItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                // Retryable: were this the newest attempt after all (two
                // hosts' clocks apart by more than the attempts), its retry
                // comes later still. An older attempt's task is closed: its
                // error goes nowhere.
                Err(StoreError::Unavailable(
                    "a newer attempt of this acquire has queued since, with its own task token"
                        .into(),
                ))
            }
            Err(error) => Err(classify("PutItem", error)),
        }
    }

    /// The waiter behind `entry`; `None` if its item is gone.
    pub(crate) async fn read_waiter(&self, entry: &Entry) -> Result<Option<Waiter>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(&entry.waiter_key()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|error| classify("GetItem", error))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        Ok(Some(Waiter {
            owner: Owner::new(read_string(&item, OWNER)?).map_err(|_| malformed(OWNER))?,
            token: read_string(&item, TASK_TOKEN)?,
            lease: LeaseSeconds::new(LEASE_SECONDS, read_number(&item, LEASE_SECONDS)?)
                .map_err(|_| malformed(LEASE_SECONDS))?,
            limit: Limit::new(LIMIT, read_number(&item, LIMIT)?).map_err(|_| malformed(LIMIT))?,
            enqueued_at: EpochMillis(read_number(&item, ENQUEUED_AT)?),
        }))
    }

    pub(crate) async fn enqueue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        let write = Write::new(ENQUEUE, ENQUEUE_CONDITION)
            .names(&[QUEUE_SEQ, QUEUE_LENGTH, OWNER, EXPIRES_AT, HOLDER_COUNT])
            .name_as("#entry", &entry_name(lock_name, owner))
            .value(":zero", number(0))
            .value(":one", number(1))
            .value(":maxQueue", number(MAX_QUEUE))
            .value(":now", number(now.0))
            .value(":limit", number(limit.get()));
        self.conditional_update(lock_name.as_str(), write).await
    }

    pub(crate) async fn drop_entry(
        &self,
        lock_name: &LockName,
        entry: &Entry,
    ) -> Result<Item, WriteFailure> {
        let write = Write::new(DROP_ENTRY, DROP_ENTRY_CONDITION)
            .names(&[QUEUE_LENGTH])
            .name_as("#entry", &entry.name)
            .value(":seq", number(entry.seq))
            .value(":one", number(1));
        self.conditional_update(lock_name.as_str(), write).await
    }
}
