//! The lock on one DynamoDB item per lock name.
//!
//! Item: `lockName` (partition key), `owner`, `acquiredAt` and `expiresAt`
//! (epoch milliseconds), `fencingToken`, and `ttl` (epoch seconds, garbage
//! collection only). A released lock keeps its item, without `owner`, so the
//! fencing counter survives, and records its last release (`releasedBy`,
//! `releasedToken`, `releaseId`) so that a retried release can tell its own
//! landed write from someone else's grant; `owner` is also the key of the
//! sparse index [`OWNER_INDEX`] that finds every lock an execution still holds.

mod acquire;
mod grant;
mod handoff;
pub(crate) mod item;
mod permit_markers;
mod permit_release;
mod permit_writes;
pub mod permits;
pub mod queue;
mod queued;
mod renew;
mod store;
mod table;
mod take_back;
mod view;
mod waiters;
mod wakes;

pub use grant::{GRANT, GRANT_CONDITION, RELEASE, RELEASE_CONDITION};
#[cfg(test)]
pub(crate) use handoff::MAX_HAND_OFFS;
pub use permits::HOLDER_COUNT;
pub use queue::QUEUE_LENGTH;
#[cfg(test)]
pub(crate) use table::MAX_ACQUIRE_ROUNDS;
pub use table::{
    DynamoStore, ACQUIRED_AT, EXPIRES_AT, FENCING_TOKEN, LOCK_NAME, OWNER, OWNER_INDEX,
    OWNER_QUERY_PAGE_SIZE, RELEASED_BY, RELEASED_TOKEN, RELEASE_ID, TTL, TTL_GRACE_SECONDS,
};
