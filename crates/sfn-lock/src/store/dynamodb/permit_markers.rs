//! The markers that let the sweep find a semaphore's permits: one small item
//! per holder beside the lock's item, written before every semaphore acquire
//! (unconditional: a marker only points the sweep at a lock to look at).

use crate::aws::errors::classify;
use crate::store::dynamodb::item::{gc_after, number, string};
use crate::store::dynamodb::permits::{marker_key, PERMIT_OF};
use crate::store::dynamodb::table::{DynamoStore, LOCK_NAME, OWNER, TTL};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner};
use tracing::warn;

impl DynamoStore {
    /// Written before every semaphore acquire, so that a grant is never
    /// without one: the sweep finds an ended execution's permits through it.
    pub(crate) async fn put_marker(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        expires_at: EpochMillis,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table_name)
            .item(LOCK_NAME, string(&marker_key(lock_name, owner)))
            .item(OWNER, string(owner.as_str()))
            .item(PERMIT_OF, string(lock_name.as_str()))
            .item(TTL, number(gc_after(expires_at)))
            .send()
            .await
            .map_err(|error| classify("PutItem", error))?;
        Ok(())
    }

    /// After a permit's release. A marker left behind costs the sweep one
    /// `not_held` release; TTL collects it.
    pub(crate) async fn delete_marker(&self, lock_name: &LockName, owner: &Owner) {
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(&marker_key(lock_name, owner)))
            .send()
            .await;
        if let Err(error) = deleted {
            let error = classify("DeleteItem", error);
            warn!(lock_name = lock_name.as_str(), owner = owner.as_str(), %error,
                  "permit released; its sweep marker stays until TTL");
        }
    }

    /// The lock a marker names; `None` if the marker is gone.
    pub(crate) async fn marker_lock(&self, key: &str) -> Result<Option<LockName>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|error| classify("GetItem", error))?;
        let Some(item) = output.item else {
            return Ok(None);
        };
        let name = crate::store::dynamodb::item::read_string(&item, PERMIT_OF)?;
        LockName::new(name)
            .map(Some)
            .map_err(|_| crate::store::dynamodb::item::malformed(PERMIT_OF))
    }
}
