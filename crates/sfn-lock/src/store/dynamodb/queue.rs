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

use sha2::{Digest, Sha256};

use crate::store::dynamodb::item::{malformed, read_number, read_string};
use crate::store::dynamodb::permits::{worst_item_bytes, MAX_ITEM_BYTES};
use crate::store::dynamodb::table::Item;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner, MAX_LOCK_NAME_BYTES};
use crate::vocab::request::{LeaseSeconds, Limit, MAX_LIMIT};

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

/// The id naming one owner's place in one lock's queue.
pub(crate) fn waiter_id(lock_name: &LockName, owner: &Owner) -> String {
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
    /// The marker's value as read: `<seq>/<sends>/<nonce>`.
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
mod tests;
