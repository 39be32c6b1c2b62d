//! Undoing a hand-off to a waiter whose task had ended: the grant goes back,
//! only while it is still that very grant (DESIGN.md, "Queue").

use crate::store::dynamodb::item::{gc_after, number, string};
use crate::store::dynamodb::permits::permit_names;
use crate::store::dynamodb::permits::HOLDER_COUNT;
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, ACQUIRED_AT, EXPIRES_AT, FENCING_TOKEN, OWNER, TTL,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{Lease, LockName};
use crate::vocab::request::Limit;
use aws_sdk_dynamodb::types::AttributeValue;
use tracing::warn;

/// Takes a handed grant back from a waiter whose task had ended, only while
/// it is still that grant, unrenewed, and (for a hand-off) its marker still
/// as this pump wrote it: a marker claimed by another pump means a second
/// wake-up was sent, and the waiter may run. No release record is written:
/// the record belongs to the last real release, whose retry must find it.
const TAKE_BACK_MUTEX: &str = "REMOVE #owner, #acquiredAt, #expiresAt SET #ttl = :ttl";
const TAKE_BACK_MUTEX_CONDITION: &str =
    "#owner = :owner AND #fencingToken = :fencingToken AND #expiresAt = :expiresAt";
const TAKE_BACK_PERMIT: &str = "REMOVE #permit, #token SET #holderCount = #holderCount - :one";
const TAKE_BACK_PERMIT_CONDITION: &str =
    "#token = :fencingToken AND #permit.#expiresAt = :expiresAt";

impl DynamoStore {
    /// Frees a grant just made for a waiter whose task had ended: only that
    /// very grant, unrenewed, and with `marker` (a hand-off's wake marker and
    /// the value this pump wrote) only while no other pump has claimed it;
    /// the marker goes with the grant. The item after, or as found if the
    /// grant changed (then it stays).
    pub(crate) async fn take_back(
        &self,
        lock_name: &LockName,
        lease: &Lease,
        limit: Limit,
        marker: Option<(&str, &str)>,
    ) -> Result<Option<Item>, StoreError> {
        let owner = lease.owner.as_str();
        let (permit, token) = permit_names(owner);
        let mut write = match limit.is_mutex() {
            true => Write::new(TAKE_BACK_MUTEX, TAKE_BACK_MUTEX_CONDITION)
                .names(&[OWNER, ACQUIRED_AT, EXPIRES_AT, TTL, FENCING_TOKEN])
                .value(":owner", string(owner))
                .value(":ttl", number(gc_after(lease.expires_at))),
            false => Write::new(TAKE_BACK_PERMIT, TAKE_BACK_PERMIT_CONDITION)
                .names(&[HOLDER_COUNT, EXPIRES_AT])
                .name_as("#permit", &permit)
                .name_as("#token", &token)
                .value(":one", number(1)),
        }
        .value(":fencingToken", number(lease.fencing_token))
        .value(":expiresAt", number(lease.expires_at.0));
        if let Some((wake, value)) = marker {
            // Both expressions start with their REMOVE clause.
            write.update = write.update.replacen("REMOVE ", "REMOVE #wake, ", 1);
            write.condition += " AND #wake = :wake";
            write = write.name_as("#wake", wake).value(":wake", string(value));
        }
        match self.conditional_update(lock_name.as_str(), write).await {
            Ok(item) => Ok(Some(item)),
            Err(WriteFailure::ConditionFailed(item)) => {
                // The grant is gone if this very write landed and lost its
                // answer (the SDK's retry then failed): the caller's line
                // said "taken back" already. Only a grant that stayed is a
                // decision of its own, with a line of its own.
                let held_by = |attribute: &str, value: &AttributeValue| {
                    item.as_ref()
                        .and_then(|item| item.get(attribute))
                        .is_some_and(|found| found == value)
                };
                let stays = match limit.is_mutex() {
                    // The token too: the same owner may have been granted
                    // again since (a retried acquire), which is not this grant.
                    true => {
                        held_by(OWNER, &string(owner))
                            && held_by(FENCING_TOKEN, &number(lease.fencing_token))
                    }
                    false => held_by(&token, &number(lease.fencing_token)),
                };
                if stays {
                    warn!(
                        lock_name = lock_name.as_str(),
                        owner,
                        "a handed grant changed, or another pump woke its waiter, before it could be taken back; it stays"
                    );
                }
                Ok(item)
            }
            Err(WriteFailure::Store(error)) => Err(error),
        }
    }
}
