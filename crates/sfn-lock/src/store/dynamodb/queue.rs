//! The fair queue on DynamoDB (DESIGN.md, "Queue").
//!
//! On the lock's item: `queue:<id>` = the waiter's sequence number (FIFO
//! order), `queueLength` (entries present) and `queueSeq` (the last number
//! given). `<id>` is 128 bits of SHA-256 of lock name and owner, so one owner
//! has one place at most. Beside it, a waiter item keyed `\u{1}waiter\u{1}<id>`
//! holds what a hand-off needs (owner, task token, lease, limit) and, through
//! `owner` and `permitOf`, lets the sweep find an ended execution's place the
//! way it finds a permit. Entries stay small so that a full queue and a full
//! semaphore fit in one item together.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use sha2::{Digest, Sha256};

use crate::aws::errors::classify;
use crate::store::dynamodb::item::{gc_after, malformed, number, read_number, read_string, string};
use crate::store::dynamodb::permits::HOLDER_COUNT;
use crate::store::dynamodb::permits::{worst_item_bytes, MAX_ITEM_BYTES, PERMIT_OF};
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, EXPIRES_AT, LOCK_NAME, OWNER, TTL,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner, MAX_LEASE_SECONDS, MAX_LOCK_NAME_BYTES};
use crate::vocab::request::{LeaseSeconds, Limit, WaitBound, MAX_LIMIT};
use crate::vocab::task_token::TaskToken;

pub const QUEUE_LENGTH: &str = "queueLength";
pub const QUEUE_SEQ: &str = "queueSeq";
pub const ENTRY_PREFIX: &str = "queue:";
pub const WAITER_PREFIX: &str = "\u{1}waiter\u{1}";
/// An unconfirmed hand-off (DESIGN.md, "Queue"): `wake:<id>` on the lock's
/// item, written by the hand-off itself, removed once its waiter is woken.
/// Its value is `<seq>/<sends>/<nonce>`: the place it was handed from, how
/// many later pumps have claimed it to send the wake-up again, and who wrote
/// it last (one value per call: only the SDK's retry of that very request
/// carries it again, so a pump never mistakes another's hand-off for its own).
pub const WAKE_PREFIX: &str = "wake:";
pub const TASK_TOKEN: &str = "taskToken";
pub const ENQUEUED_AT: &str = "enqueuedAt";
pub const LEASE_SECONDS: &str = "leaseSeconds";
pub const LIMIT: &str = "limit";
/// Waiters one lock holds; a caller beyond them is refused as contended
/// (`LockUnavailable`), so a state machine falls back to its Retry loop.
pub const MAX_QUEUE: usize = 100;
/// One entry: `queue:<32 hex>` 38 bytes, a sequence number at most 11.
pub const ENTRY_BYTES: usize = 50;
/// `queueLength` and `queueSeq`, names and numbers.
const QUEUE_COUNTER_BYTES: usize = 11 + 8 + 11 + 11;
/// Unconfirmed hand-offs one lock keeps at most: while this many wait for
/// their wake-up to be confirmed, no further room is handed out (each
/// re-send comes first), which bounds the item's size.
pub const MAX_PENDING_WAKES: usize = 4;
/// One marker: `wake:<32 hex>` 37 bytes, `<seq>/<sends>/<nonce>` at most
/// 11 + 1 + 3 + 1 + 16.
pub const WAKE_BYTES: usize = 70;
/// Claims counted in a marker; more are counted as this many.
const MAX_SENDS: u32 = 999;

// A full queue beside a full semaphore (one permit over, as there) still fits.
const _: () = assert!(
    worst_item_bytes(MAX_LOCK_NAME_BYTES, MAX_LIMIT + 1)
        + MAX_QUEUE * ENTRY_BYTES
        + QUEUE_COUNTER_BYTES
        + MAX_PENDING_WAKES * WAKE_BYTES
        <= MAX_ITEM_BYTES
);

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

/// The id naming one owner's place in one lock's queue.
fn waiter_id(lock_name: &LockName, owner: &Owner) -> String {
    let mut digest = Sha256::new();
    digest.update(lock_name.as_str().as_bytes());
    digest.update([0]);
    digest.update(owner.as_str().as_bytes());
    digest.finalize()[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `owner`'s wake marker on the lock (see [`WAKE_PREFIX`]).
pub fn wake_name(lock_name: &LockName, owner: &Owner) -> String {
    format!("{WAKE_PREFIX}{}", waiter_id(lock_name, owner))
}

pub fn entry_name(lock_name: &LockName, owner: &Owner) -> String {
    format!("{ENTRY_PREFIX}{}", waiter_id(lock_name, owner))
}

/// One place in the queue, as the lock's item holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub seq: u64,
}

impl Entry {
    pub fn waiter_key(&self) -> String {
        format!("{WAITER_PREFIX}{}", &self.name[ENTRY_PREFIX.len()..])
    }

    /// The marker a hand-off from this place writes.
    pub fn wake_name(&self) -> String {
        format!("{WAKE_PREFIX}{}", &self.name[ENTRY_PREFIX.len()..])
    }

    /// The marker's value as a hand-off writes it: nobody has claimed it,
    /// and `nonce` names this one write.
    pub fn fresh_wake(&self, nonce: &str) -> String {
        format!("{}/0/{nonce}", self.seq)
    }
}

/// An unconfirmed hand-off on the lock's item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingWake {
    /// The place it was handed from: the waiter item's key, the marker's name.
    pub entry: Entry,
    /// The marker's value as read: `<seq>/<sends>`.
    pub value: String,
    pub sends: u32,
}

impl PendingWake {
    /// The value a pump writes to claim the marker before it sends again.
    pub fn claimed(&self, nonce: &str) -> String {
        let sends = self.sends.saturating_add(1).min(MAX_SENDS);
        format!("{}/{sends}/{nonce}", self.entry.seq)
    }
}

/// A fresh marker value's nonce: 16 hex digits, new for every write.
pub(crate) fn wake_nonce() -> String {
    let id = crate::store::ids::release_id();
    id.rsplit('-').next().unwrap_or(&id).to_owned()
}

/// The item's unconfirmed hand-offs, oldest place first.
pub(crate) fn pending_wakes(item: &Item) -> Result<Vec<PendingWake>, StoreError> {
    let mut pending = item
        .iter()
        .filter(|(name, _)| name.starts_with(WAKE_PREFIX))
        .map(|(name, _)| {
            let value = read_string(item, name)?;
            let mut parts = value.splitn(3, '/');
            let (seq, sends) = (parts.next(), parts.next());
            let (seq, sends) = seq
                .zip(sends)
                .and_then(|(seq, sends)| Some((seq.parse().ok()?, sends.parse().ok()?)))
                .ok_or_else(|| malformed(name))?;
            let id = &name[WAKE_PREFIX.len()..];
            Ok(PendingWake {
                entry: Entry {
                    name: format!("{ENTRY_PREFIX}{id}"),
                    seq,
                },
                value,
                sends,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    pending.sort_by_key(|wake| wake.entry.seq);
    Ok(pending)
}

/// The item's entries, oldest first.
pub(crate) fn queue_of(item: &Item) -> Result<Vec<Entry>, StoreError> {
    let mut entries = item
        .keys()
        .filter(|name| name.starts_with(ENTRY_PREFIX))
        .map(|name| {
            Ok(Entry {
                name: name.clone(),
                seq: read_number(item, name)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    entries.sort_by_key(|entry| entry.seq);
    Ok(entries)
}

/// What a hand-off needs to know of a waiter.
#[derive(Clone, Debug)]
pub(crate) struct Waiter {
    pub owner: Owner,
    pub token: String,
    pub lease: LeaseSeconds,
    pub limit: Limit,
    pub enqueued_at: EpochMillis,
}

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

/// The place of `entry_name` in the item's queue, 1 being next.
pub(crate) fn position_of(item: &Item, entry_name: &str) -> Result<Option<u32>, StoreError> {
    let queue = queue_of(item)?;
    Ok(queue
        .iter()
        .position(|entry| entry.name == entry_name)
        .map(|index| u32::try_from(index + 1).unwrap_or(u32::MAX)))
}

/// `queueLength` as the item records it (0 when absent).
pub(crate) fn queue_length(item: &Item) -> Result<usize, StoreError> {
    match item.get(QUEUE_LENGTH) {
        None => Ok(0),
        Some(_) => read_number(item, QUEUE_LENGTH),
    }
}

/// The task output a woken waiter's state receives: acquire's own answer
/// (`outcome` `granted` or `renewed`).
pub(crate) fn grant_output(
    lease: &crate::vocab::model::Lease,
    lease_seconds: LeaseSeconds,
    limit: Limit,
    outcome: crate::vocab::model::Outcome,
) -> String {
    let answer = crate::vocab::answer::AcquireResponse::new(lease, lease_seconds, limit, outcome);
    // Plain fields only: serialising cannot fail.
    serde_json::to_string(&answer).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hand_off_writes_a_marker_of_its_own() {
        // Two pumps handing the same place must not take each other's
        // landed write for their own (its answer lost): the nonce differs.
        let entry = Entry {
            name: format!("{ENTRY_PREFIX}{}", "0".repeat(32)),
            seq: 7,
        };
        let (first, second) = (
            entry.fresh_wake(&wake_nonce()),
            entry.fresh_wake(&wake_nonce()),
        );
        assert_ne!(first, second);
        assert!(first.starts_with("7/0/"), "{first}");
        assert!(
            first.len() + entry.wake_name().len() <= WAKE_BYTES,
            "{first}"
        );
    }
}
