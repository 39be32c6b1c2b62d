//! A semaphore's release: removing the caller's permit, only if it is still
//! that grant and not already released by this very call (a retry).

use crate::store::dynamodb::grant::{released_by_this_call, Released};
use crate::store::dynamodb::item::{number, string};
use crate::store::dynamodb::permits::HOLDER_COUNT;
use crate::store::dynamodb::permits::{permit_names, permit_of};
use crate::store::dynamodb::queue::wake_name;
use crate::store::dynamodb::table::{
    DynamoStore, Write, WriteFailure, ACQUIRED_AT, OWNER, RELEASED_BY, RELEASED_TOKEN, RELEASE_ID,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner, ReleaseOutcome};

/// Frees the caller's permit and records the release as the mutex does.
pub(crate) const RELEASE_PERMIT: &str = "REMOVE #permit, #token, #wake \
     SET #holderCount = #holderCount - :one, #releasedBy = :owner, #releasedToken = #token, \
     #releaseId = :releaseId";
const RELEASE_PERMIT_CONDITION: &str =
    "attribute_exists(#permit) AND (attribute_not_exists(#releaseId) OR #releaseId <> :releaseId)";

impl DynamoStore {
    /// The permit-format release. `Ok(None)`: the caller holds the lock in
    /// the mutex format instead.
    pub(crate) async fn release_permit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        release_id: &str,
        granted_before: Option<EpochMillis>,
    ) -> Result<Option<Released>, StoreError> {
        let (permit, token) = permit_names(owner.as_str());
        let mut write = Write::new(RELEASE_PERMIT, RELEASE_PERMIT_CONDITION)
            .names(&[HOLDER_COUNT, RELEASED_BY, RELEASED_TOKEN, RELEASE_ID])
            .name_as("#wake", &wake_name(lock_name, owner))
            .name_as("#permit", &permit)
            .name_as("#token", &token)
            .value(":owner", string(owner.as_str()))
            .value(":one", number(1))
            .value(":releaseId", string(release_id));
        if let Some(bound) = granted_before {
            write.condition += " AND #permit.#acquiredAt <= :grantedBefore";
            write = write
                .names(&[ACQUIRED_AT])
                .value(":grantedBefore", number(bound.0));
        }
        let old_item = match self.conditional_update(lock_name.as_str(), write).await {
            Ok(item) => {
                self.delete_marker(lock_name, owner).await;
                return Ok(Some(Released::new(ReleaseOutcome::Released, Some(item))));
            }
            Err(WriteFailure::Store(error)) => return Err(error),
            Err(WriteFailure::ConditionFailed(None)) => {
                return Ok(Some(Released::new(ReleaseOutcome::NotHeld, None)))
            }
            Err(WriteFailure::ConditionFailed(Some(item))) => item,
        };
        if released_by_this_call(&old_item, release_id) {
            return Ok(Some(Released::new(
                ReleaseOutcome::Released,
                Some(old_item),
            )));
        }
        let mutex_holder = old_item
            .get(OWNER)
            .and_then(|value| value.as_s().ok())
            .is_some_and(|holder| holder == owner.as_str());
        if mutex_holder {
            return Ok(None);
        }
        // A permit granted after `granted_before`: the same owner's later grant.
        let outcome = match permit_of(&old_item, owner)? {
            Some(later) => ReleaseOutcome::HeldByOther(later.holder),
            // Released already, or expired and removed by another's acquire.
            None => ReleaseOutcome::NotHeld,
        };
        Ok(Some(Released::new(outcome, Some(old_item))))
    }
}
