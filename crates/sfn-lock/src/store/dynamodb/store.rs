//! [`LockStore`] on DynamoDB: which writes an acquire or a release makes, in
//! which order. The writes and their conditions are in `store/dynamodb/grant.rs` (the
//! mutex) and `store/dynamodb/permit_writes.rs` (a semaphore's permits).

use crate::aws::errors::classify;
use crate::ports::store::LockStore;
use crate::store::dynamodb::grant::Released;
use crate::store::dynamodb::handoff::holds;
use crate::store::dynamodb::item::{malformed, string};
use crate::store::dynamodb::permits::{check_fits, MARKER_PREFIX};
use crate::store::dynamodb::queue::{pending_wakes, queue_length, WAITER_PREFIX};
use crate::store::dynamodb::queued::Core;
use crate::store::dynamodb::table::{
    DynamoStore, Item, EXPIRES_AT, LOCK_NAME, OWNER, OWNER_INDEX, OWNER_QUERY_PAGE_SIZE,
};
use crate::store::ids::release_id;
use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::vocab::request::{LeaseSeconds, Limit, Waiting};
use crate::vocab::view::{LockList, LockView};

impl DynamoStore {
    /// Releases `owner`'s grant in whichever format it has, trying first the
    /// one `limit` suggests: one write when the hint is right, two when not.
    async fn release_any(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        granted_before: Option<EpochMillis>,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        if granted_before.is_some() {
            // The sweep: most of what an ended execution's owner index shows
            // is held no more (a woken or departed waiter's item, a lock it
            // released). One read then, not a failed write billed at the
            // size of a lock item that may carry a thousand permits.
            let Some(item) = self.read_item(lock_name.as_str()).await? else {
                return Ok(ReleaseOutcome::NotHeld);
            };
            if !holds(&item, owner)? {
                // Still queued: its place goes (one write); else nothing to write.
                let item = Box::pin(self.leave_queue(lock_name, owner, item, granted_before));
                if let Some(item) = item.await?.filter(owes_the_queue) {
                    Box::pin(self.pump(lock_name, item, now)).await?;
                }
                return Ok(ReleaseOutcome::NotHeld);
            }
        }
        // The SDK retries one request with the same id when an attempt's
        // answer is lost; the id tells that retry its own landed write apart.
        let release_id = release_id();
        // Boxed: two formats' futures nested in one more layer exceed rustc's
        // layout query depth in the binaries without a break here.
        let mutex =
            || Box::pin(self.release_mutex(lock_name, owner, &release_id, granted_before, now));
        let permit =
            || Box::pin(self.release_permit(lock_name, owner, &release_id, granted_before));
        let answer = match limit.is_mutex() {
            true => match mutex().await? {
                Some(released) => Some(released),
                None => permit().await?,
            },
            false => match permit().await? {
                Some(released) => Some(released),
                None => mutex().await?,
            },
        };
        // Each format hands over to the other only when the other holds the
        // caller's grant; seeing that twice means the item changed in between.
        let Released { outcome, item } = answer.ok_or_else(|| {
            StoreError::Unavailable(format!(
                "lock {lock_name:?} changed format twice during one release"
            ))
        })?;
        let Some(item) = item else {
            return Ok(outcome);
        };
        // A waiter that gave up (its Catch) or ended (the sweep) leaves the
        // queue; then room goes to the oldest waiter. Retried, this goes on
        // where a failed call stopped.
        let item = Box::pin(self.leave_queue(lock_name, owner, item, granted_before)).await?;
        if let Some(item) = item.filter(owes_the_queue) {
            Box::pin(self.pump(lock_name, item, now)).await?;
        }
        Ok(outcome)
    }
}

/// The reconciler's pick: an owed wake-up, or waiters that no live mutex
/// holder keeps waiting (see [`LockStore::queues_to_wake`]).
fn may_need_a_wake(item: &Item, now: EpochMillis) -> bool {
    let mutex_held = item.contains_key(OWNER)
        && item
            .get(EXPIRES_AT)
            .and_then(|value| value.as_n().ok())
            .and_then(|value| value.parse::<i64>().ok())
            .is_some_and(|expires_at| expires_at >= now.0);
    pending_wakes(item).is_ok_and(|pending| !pending.is_empty())
        || (queue_length(item).is_ok_and(|length| length > 0) && !mutex_held)
}

/// Whether the item shows waiters, or wake-ups earlier hand-offs still owe:
/// then whoever wrote it pumps.
pub(crate) fn owes_the_queue(item: &Item) -> bool {
    queue_length(item).is_ok_and(|length| length > 0)
        || pending_wakes(item).is_ok_and(|pending| !pending.is_empty())
}

impl DynamoStore {
    /// One item, read consistently; `None` if there is none.
    pub(crate) async fn read_item(&self, key: &str) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|error| classify("GetItem", error))?;
        Ok(output.item)
    }
}

impl LockStore for DynamoStore {
    async fn acquire_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        if !limit.is_mutex() {
            check_fits(owner)?;
            let expires_at = now.plus_seconds(lease.get());
            self.put_marker(lock_name, owner, expires_at).await?;
        }
        match self
            .acquire_core(lock_name, owner, lease, limit, false, now)
            .await?
        {
            Core::Done(outcome) => Ok(outcome),
            Core::HandedToCaller(lease) => Ok(AcquireOutcome::Granted(lease)),
        }
    }

    async fn acquire_or_queue(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        waiting: &Waiting,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        self.acquire_queued(lock_name, owner, lease, limit, waiting, now)
            .await
    }

    async fn release_with_limit(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_any(lock_name, owner, limit, None, now).await
    }

    async fn release_granted_before(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: EpochMillis,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_any(lock_name, owner, Limit::ONE, Some(granted_before), now)
            .await
    }

    async fn locks_held_by(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        let mut names = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table_name)
                .index_name(OWNER_INDEX)
                .key_condition_expression("#owner = :owner")
                .expression_attribute_names("#owner", OWNER)
                .expression_attribute_values(":owner", string(owner.as_str()))
                .limit(OWNER_QUERY_PAGE_SIZE)
                .set_exclusive_start_key(start_key)
                .send()
                .await
                .map_err(|error| classify("Query", error))?;
            for item in page.items() {
                let key = item
                    .get(LOCK_NAME)
                    .and_then(|value| value.as_s().ok())
                    .ok_or_else(|| malformed(LOCK_NAME))?;
                if key.starts_with(MARKER_PREFIX) || key.starts_with(WAITER_PREFIX) {
                    // A semaphore permit's marker or a waiter: one read finds its lock.
                    names.extend(self.marker_lock(key).await?);
                } else {
                    names.push(LockName::new(key.clone()).map_err(|_| malformed(LOCK_NAME))?);
                }
            }
            // DynamoDB leaves LastEvaluatedKey out after the last page.
            match page.last_evaluated_key {
                Some(key) => start_key = Some(key),
                None => {
                    // A waiter's lock may also hold it as its owner: once each.
                    let mut seen = std::collections::HashSet::new();
                    names.retain(|name| seen.insert(name.clone()));
                    return Ok(names);
                }
            }
        }
    }

    async fn inspect(&self, lock_name: &LockName) -> Result<LockView, StoreError> {
        self.inspect_item(lock_name).await
    }

    async fn list_held(&self, max: usize) -> Result<LockList, StoreError> {
        self.scan_held(max).await
    }

    async fn queues_to_wake(
        &self,
        max: usize,
        now: EpochMillis,
    ) -> Result<Vec<LockName>, StoreError> {
        self.scan_queues(max, |item| may_need_a_wake(item, now))
            .await
    }

    async fn wake_queue(&self, lock_name: &LockName, now: EpochMillis) -> Result<bool, StoreError> {
        let Some(item) = self.read_item(lock_name.as_str()).await? else {
            return Ok(false);
        };
        if !may_need_a_wake(&item, now) {
            return Ok(false);
        }
        let owed = pending_wakes(&item)?.len();
        let pumped = Box::pin(self.pump(lock_name, item, now)).await?;
        let still_owed = match &pumped.item {
            Some(item) => pending_wakes(item)?.len(),
            None => 0,
        };
        Ok(pumped.handed.is_some() || still_owed < owed)
    }
}
