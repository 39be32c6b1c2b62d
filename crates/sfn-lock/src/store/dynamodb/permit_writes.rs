//! The writes of a semaphore's permits (layout: `permits.rs`; release: `permit_release.rs`; markers: `permit_markers.rs`). Each
//! is one conditional `UpdateItem` on the lock's item; the marker that lets the
//! sweep find a permit is a separate, unconditional item.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::store::dynamodb::grant::{grant_assignments, queue_empty, HandOff};
use crate::store::dynamodb::item::{gc_after, number, string};
use crate::store::dynamodb::permits::HOLDER_COUNT;
use crate::store::dynamodb::permits::{permit_names, Permit};
use crate::store::dynamodb::queue::wake_name;
use crate::store::dynamodb::queue::QUEUE_LENGTH;
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, ACQUIRED_AT, EXPIRES_AT, FENCING_TOKEN, OWNER, TTL,
};
use crate::store::ids::token_base;
use crate::vocab::model::{EpochMillis, LockName, Owner, MAX_LEASE_SECONDS};
use crate::vocab::request::Limit;

/// GRANT_PERMIT's assignments but the count, shared with [`DynamoStore::prune`].
macro_rules! permit_assignments {
    () => {
        "#token = if_not_exists(#fencingToken, :tokenBase) + :one, \
         #fencingToken = if_not_exists(#fencingToken, :tokenBase) + :one, \
         #permit = :permit, #ttl = :ttl"
    };
}
/// A permit is free and the caller has none: add it, with the next token.
/// `#token` is listed before `#fencingToken`: both read the counter as it was
/// (DynamoDB evaluates every operand on the old item).
const GRANT_PERMIT: &str = concat!(
    "SET ",
    permit_assignments!(),
    ", #holderCount = if_not_exists(#holderCount, :zero) + :one \
     REMOVE #owner, #acquiredAt, #expiresAt, #wake"
);
/// Room for a permit: fewer than `limit` present (live or expired), none the
/// caller's, and no live mutex holder.
macro_rules! permit_room {
    () => {
        "attribute_not_exists(#permit) \
         AND (attribute_not_exists(#owner) OR #expiresAt < :now) \
         AND (attribute_not_exists(#holderCount) OR #holderCount < :limit)"
    };
}
const GRANT_PERMIT_CONDITION: &str = concat!(permit_room!(), " AND ", queue_empty!());
/// A hand-off: GRANT_PERMIT for the waiter at the head of the queue, which
/// leaves it, with the marker of its unconfirmed wake-up (as `HAND_OFF`).
const HAND_OFF_PERMIT: &str = concat!(
    "SET ",
    permit_assignments!(),
    ", #holderCount = if_not_exists(#holderCount, :zero) + :one, \
     #queueLength = #queueLength - :one, #wake = :wake \
     REMOVE #owner, #acquiredAt, #expiresAt, #entry"
);
const HAND_OFF_PERMIT_CONDITION: &str = concat!(permit_room!(), " AND #entry = :seq");

/// The caller's own permit, still this grant and still live: move its expiry.
/// The whole map is written again (its `acquiredAt` as read): a SET of a member
/// path would fail as an invalid path, not as a failed condition, if the
/// permit were gone, and DynamoDB does not document which it checks first.
const RENEW_PERMIT: &str = "SET #permit = :permit, #ttl = :ttl";
/// As RENEW_CONDITION (`store/dynamodb/renew.rs`): live, and its expiry as read.
const RENEW_PERMIT_CONDITION: &str = "#token = :fencingToken \
     AND #permit.#expiresAt >= :now AND #permit.#expiresAt = :heldUntil";

/// A permit write keeps the item past every permit's lease: leases differ per
/// request and an update cannot take a maximum, so TTL gets the longest lease.
fn permit_ttl(now: EpochMillis) -> AttributeValue {
    number(gc_after(now.plus_seconds(MAX_LEASE_SECONDS)))
}

pub(crate) fn permit_value(
    owner: &Owner,
    acquired_at: EpochMillis,
    expires_at: EpochMillis,
) -> AttributeValue {
    AttributeValue::M(
        [
            (OWNER.to_owned(), string(owner.as_str())),
            (ACQUIRED_AT.to_owned(), number(acquired_at.0)),
            (EXPIRES_AT.to_owned(), number(expires_at.0)),
        ]
        .into(),
    )
}

/// The expired permits one pruning write removes: those the caller saw, as
/// many as it counted (`holderCount`), and whether it takes a grant too.
pub(crate) struct PruneBatch<'a> {
    pub seen_count: usize,
    pub expired: &'a [Permit],
    pub grant: bool,
}

impl DynamoStore {
    /// A permit grant; with `hand_off`, the hand-off to that waiter.
    pub(crate) async fn grant_permit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        expires_at: EpochMillis,
        now: EpochMillis,
        hand_off: Option<HandOff<'_>>,
    ) -> Result<Item, WriteFailure> {
        let (permit, token) = permit_names(owner.as_str());
        let (mut write, acquired_at) = match hand_off {
            None => (
                Write::new(GRANT_PERMIT, GRANT_PERMIT_CONDITION)
                    .name_as("#wake", &wake_name(lock_name, owner)),
                now,
            ),
            Some(HandOff {
                entry,
                requested_at,
                nonce,
            }) => (
                Write::new(HAND_OFF_PERMIT, HAND_OFF_PERMIT_CONDITION)
                    .name_as("#entry", &entry.name)
                    .name_as("#wake", &entry.wake_name())
                    .value(":wake", string(&entry.fresh_wake(nonce)))
                    .value(":seq", number(entry.seq)),
                requested_at,
            ),
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
            .name_as("#permit", &permit)
            .name_as("#token", &token)
            .value(":permit", permit_value(owner, acquired_at, expires_at))
            .value(":now", number(now.0))
            .value(":limit", number(limit.get()))
            .value(":ttl", permit_ttl(now))
            .value(":tokenBase", number(token_base(now)))
            .value(":one", number(1))
            .value(":zero", number(0));
        self.conditional_update(lock_name.as_str(), write).await
    }

    pub(crate) async fn renew_permit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        (fencing_token, acquired_at, held_until): (u64, EpochMillis, EpochMillis),
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        let (permit, token) = permit_names(owner.as_str());
        let write = Write::new(RENEW_PERMIT, RENEW_PERMIT_CONDITION)
            .names(&[EXPIRES_AT, TTL])
            .name_as("#permit", &permit)
            .name_as("#token", &token)
            .value(":fencingToken", number(fencing_token))
            .value(":permit", permit_value(owner, acquired_at, expires_at))
            .value(":now", number(now.0))
            .value(":heldUntil", number(held_until.0))
            .value(":ttl", permit_ttl(now));
        self.conditional_update(lock_name.as_str(), write).await
    }

    /// Removes `expired` permits, each only if it is still that expired grant,
    /// and only if no permit came or went since (`holderCount = :seen`); with
    /// `grant`, grants the caller in the same write: a mutex lease when `limit`
    /// is 1 (every permit is gone then), else a permit.
    pub(crate) async fn prune(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        batch: PruneBatch<'_>,
        limit: Limit,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        let PruneBatch {
            seen_count,
            expired,
            grant,
        } = batch;
        let (my_permit, my_token) = permit_names(owner.as_str());
        let granting_permit = grant && limit.get() > 1;
        let mut condition = String::from(
            "#holderCount = :seen AND (attribute_not_exists(#owner) OR #expiresAt < :now)",
        );
        let mut removed = Vec::new();
        let mut write = Write::new("", "")
            .names(&[
                OWNER,
                ACQUIRED_AT,
                EXPIRES_AT,
                TTL,
                FENCING_TOKEN,
                HOLDER_COUNT,
                QUEUE_LENGTH,
            ])
            .value(":zero", number(0))
            .value(":seen", number(seen_count))
            .value(":now", number(now.0));
        for (index, permit) in expired.iter().enumerate() {
            let (permit_name, token_name) = &permit.names;
            write = write
                .name_as(&format!("#p{index}"), permit_name)
                .name_as(&format!("#t{index}"), token_name)
                .value(&format!(":t{index}"), number(permit.holder.fencing_token));
            condition += &format!(" AND #t{index} = :t{index} AND #p{index}.#expiresAt < :now");
            // The caller's own expired permit is replaced below, not removed.
            if !(granting_permit && *permit_name == my_permit) {
                removed.push(format!("#p{index}, #t{index}"));
            }
        }
        let remaining = seen_count - expired.len() + usize::from(granting_permit);
        let mut set = vec!["#holderCount = :count".to_owned()];
        write = write.value(":count", number(remaining));
        if grant {
            write = write
                .value(":tokenBase", number(token_base(now)))
                .value(":one", number(1));
        }
        if granting_permit {
            if !expired.iter().any(|permit| permit.names.0 == my_permit) {
                condition += " AND attribute_not_exists(#permit)";
            }
            set.push(permit_assignments!().to_owned());
            write = write
                .name_as("#permit", &my_permit)
                .name_as("#token", &my_token)
                .value(":permit", permit_value(owner, now, expires_at))
                .value(":ttl", permit_ttl(now));
        } else if grant {
            // The mutex grant, as GRANT writes it.
            set.push(grant_assignments!().to_owned());
            write = write
                .value(":owner", string(owner.as_str()))
                .value(":acquiredAt", number(now.0))
                .value(":expiresAt", number(expires_at.0))
                .value(":ttl", number(gc_after(expires_at)));
        }
        if grant {
            // A grant never overtakes a waiter; a hand-off prunes without one.
            condition += concat!(" AND ", queue_empty!());
        }
        if !(grant && limit.get() == 1) {
            // An expired mutex holder goes too; a mutex grant overwrites it instead.
            removed.push("#owner, #acquiredAt, #expiresAt".to_owned());
        }
        let mut update = format!("SET {}", set.join(", "));
        if !removed.is_empty() {
            update += &format!(" REMOVE {}", removed.join(", "));
        }
        write.update = update;
        write.condition = condition;
        self.conditional_update(lock_name.as_str(), write.without_unused())
            .await
    }
}
