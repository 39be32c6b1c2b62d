//! Renewing a grant the caller already holds (a retried task, or a
//! deliberate renewal): the write, and the rule for its new expiry.

use crate::store::dynamodb::item::{gc_after, lease_from, number, string};
use crate::store::dynamodb::permits::{permit_lease, Decision};
use crate::store::dynamodb::queued::Core;
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, EXPIRES_AT, FENCING_TOKEN, OWNER, TTL,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner};

/// The caller holds this very grant and it is still live: move the expiry
/// to `renewed_expiry`, always later than it was. Never earlier: a renewal
/// from a clock behind (a retried task whose first attempt ran on) must not
/// cut short the lease its holder was told. Always changed: a hand-off takes
/// back only its grant unrenewed, known by the expiry it wrote
/// (`store/dynamodb/handoff.rs`). The expiry as read makes the write a
/// compare-and-swap, so two renewals never undo each other.
const RENEW: &str = "SET #expiresAt = :expiresAt, #ttl = :ttl";
const RENEW_CONDITION: &str = "#owner = :owner AND #fencingToken = :fencingToken \
     AND #expiresAt >= :now AND #expiresAt = :heldUntil";

/// A renewal's new expiry: the one asked for, or just after the one held
/// when that is later (see RENEW).
pub(crate) fn renewed_expiry(held_until: EpochMillis, asked: EpochMillis) -> EpochMillis {
    asked.max(EpochMillis(held_until.0 + 1))
}

impl DynamoStore {
    /// Renews the caller's own live grant as `decision` found it: its new
    /// expiry is [`renewed_expiry`], never earlier and always changed.
    pub(crate) async fn renew_held(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        decision: Decision,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Result<Core, StoreError>, WriteFailure> {
        match decision {
            Decision::RenewMutex {
                fencing_token,
                expires_at: held_until,
            } => {
                let renewed = renewed_expiry(held_until, expires_at);
                self.renew(lock_name, owner, (fencing_token, held_until), renewed, now)
                    .await
                    .map(|item| {
                        lease_from(lock_name, owner, &item)
                            .map(|lease| Core::Done(AcquireOutcome::Renewed(lease)))
                    })
            }
            Decision::RenewPermit {
                fencing_token,
                acquired_at,
                expires_at: held_until,
            } => {
                let renewed = renewed_expiry(held_until, expires_at);
                if renewed > expires_at {
                    // The permit outlasts what the marker was put for:
                    // the sweep must still find it (TTL from its expiry).
                    (self.put_marker(lock_name, owner, renewed).await)
                        .map_err(WriteFailure::Store)?;
                }
                let held = (fencing_token, acquired_at, held_until);
                self.renew_permit(lock_name, owner, held, renewed, now)
                    .await
                    .map(|item| {
                        permit_lease(lock_name, owner, &item)
                            .map(|lease| Core::Done(AcquireOutcome::Renewed(lease)))
                    })
            }
            // Not a renewal (never passed here): decide again from a fresh read.
            _ => Err(WriteFailure::ConditionFailed(None)),
        }
    }

    pub(crate) async fn renew(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        (fencing_token, held_until): (u64, EpochMillis),
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        let write = Write::new(RENEW, RENEW_CONDITION)
            .names(&[OWNER, FENCING_TOKEN, EXPIRES_AT, TTL])
            .value(":owner", string(owner.as_str()))
            .value(":fencingToken", number(fencing_token))
            .value(":heldUntil", number(held_until.0))
            .value(":now", number(now.0))
            .value(":expiresAt", number(expires_at.0))
            .value(":ttl", number(gc_after(expires_at)));
        self.conditional_update(lock_name.as_str(), write).await
    }
}
