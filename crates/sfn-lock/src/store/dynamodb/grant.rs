//! A mutex's grant and release on the lock's item: the writes, and the
//! conditions that guard them (DESIGN.md, "DynamoDB store").

use crate::store::dynamodb::item::{gc_after, holder_from, number, string};
use crate::store::dynamodb::permits::{permit_of, HOLDER_COUNT};
use crate::store::dynamodb::queue::{wake_name, Entry, QUEUE_LENGTH};
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, ACQUIRED_AT, EXPIRES_AT, FENCING_TOKEN, OWNER,
    RELEASED_BY, RELEASED_TOKEN, RELEASE_ID, TTL,
};
use crate::store::ids::token_base;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner, ReleaseOutcome};

/// GRANT's assignments; the write that removes expired permits and grants a
/// mutex in the same stroke (`store/dynamodb/permit_writes.rs`) makes the same ones.
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
/// (`store/dynamodb/permits.rs`).
macro_rules! mutex_room {
    () => {
        "(attribute_not_exists(#owner) OR #expiresAt < :now) \
         AND (attribute_not_exists(#holderCount) OR #holderCount = :zero)"
    };
}
/// Nobody waits in the lock's queue (`store/dynamodb/queue.rs`): a new acquire
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
/// owed its `SendTaskSuccess` (`store/dynamodb/handoff.rs`).
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

/// A hand-off: the waiter's place, and when it asked (its `enqueuedAt`). The
/// grant records that as its `acquiredAt`: the request it answers was made
/// then, so the sweep of an execution that ended while queued releases it
/// (its guard keeps only grants asked for after the end, by a redrive). And
/// the nonce of its wake marker (`queue.rs`, WAKE_PREFIX).
#[derive(Clone, Copy)]
pub(crate) struct HandOff<'a> {
    pub entry: &'a Entry,
    pub requested_at: EpochMillis,
    pub nonce: &'a str,
}

/// A release's answer and the lock's item after it (or as found).
pub(crate) struct Released {
    pub outcome: ReleaseOutcome,
    /// `None` when there is no item.
    pub item: Option<Item>,
}

impl Released {
    pub(crate) fn new(outcome: ReleaseOutcome, item: Option<Item>) -> Self {
        Released { outcome, item }
    }
}

impl DynamoStore {
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
            Some(HandOff {
                entry,
                requested_at,
                nonce,
            }) => Write::new(HAND_OFF, HAND_OFF_CONDITION)
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
            Ok(item) => return Ok(Some(Released::new(ReleaseOutcome::Released, Some(item)))),
            Err(WriteFailure::Store(error)) => return Err(error),
            Err(WriteFailure::ConditionFailed(None)) => {
                return Ok(Some(Released::new(ReleaseOutcome::NotHeld, None)))
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
        Ok(Some(Released::new(outcome, Some(old_item))))
    }
}

/// Whether the item's release record is this call's own (an earlier attempt
/// of it landed and its answer was lost).
pub(crate) fn released_by_this_call(item: &Item, release_id: &str) -> bool {
    item.get(RELEASE_ID)
        .and_then(|value| value.as_s().ok())
        .is_some_and(|id| id == release_id)
}
