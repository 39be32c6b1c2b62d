//! The lock on one DynamoDB item per lock name.
//!
//! Item: `lockName` (partition key), `owner`, `acquiredAt` and `expiresAt`
//! (epoch milliseconds), `fencingToken`, and `ttl` (epoch seconds, garbage
//! collection only). A released lock keeps its item, without `owner`, so the
//! fencing counter survives, and records its last release (`releasedBy`,
//! `releasedToken`, `releaseId`) so that a retried release can tell its own
//! landed write from someone else's grant; `owner` is also the key of the
//! sparse index [`OWNER_INDEX`] that finds every lock an execution still holds.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

pub(crate) use crate::error::classify;
use crate::error::StoreError;
use crate::model::{AcquireOutcome, EpochMillis, LockName, Owner, ReleaseOutcome};
use crate::request::LeaseSeconds;
use crate::store::LockStore;
// How items are written and read back: values, the holder, the lease.
use crate::dynamodb_item::{
    gc_after, holder_from, lease_from, malformed, number, release_id, string,
};

pub const LOCK_NAME: &str = "lockName";
pub const OWNER: &str = "owner";
pub const ACQUIRED_AT: &str = "acquiredAt";
pub const EXPIRES_AT: &str = "expiresAt";
pub const FENCING_TOKEN: &str = "fencingToken";
pub const TTL: &str = "ttl";
/// The owner whose release last freed the lock.
pub const RELEASED_BY: &str = "releasedBy";
/// The fencing token of the grant that release ended.
pub const RELEASED_TOKEN: &str = "releasedToken";
/// Names the one release call that wrote it; the SDK's retries of that call
/// send the same value.
pub const RELEASE_ID: &str = "releaseId";
/// Global secondary index: partition key `owner`, keys only.
pub const OWNER_INDEX: &str = "owner-index";
/// Locks per page of an owner-index query. DynamoDB's own page is 1 MB (thousands
/// of keys); a smaller one keeps each answer small and lets the paging be tested.
pub const OWNER_QUERY_PAGE_SIZE: i32 = 100;

/// How long an item outlives its last lease before TTL may delete it. Long
/// enough that clock skew between writers cannot break fencing order after a
/// deletion (see [`GRANT`]).
pub const TTL_GRACE_SECONDS: u32 = 86_400;

/// The lock is free, or its lease ran out. TTL deletes lazily (hours late),
/// so expiry is decided here, never by the item's absence.
///
/// A brand-new item starts its fencing counter at the grant time in
/// microseconds, so the token still rises when TTL deleted the previous item:
/// the old counter stopped at its own start time plus its grant count, and a
/// lock sees far fewer than one grant per microsecond.
const GRANT: &str =
    "SET #owner = :owner, #acquiredAt = :now, #expiresAt = :expiresAt, #ttl = :ttl, \
     #fencingToken = if_not_exists(#fencingToken, :tokenBase) + :one";
const GRANT_CONDITION: &str = "attribute_not_exists(#owner) OR #expiresAt < :now";

/// The caller holds this very grant and it is still live: move the expiry.
const RENEW: &str = "SET #expiresAt = :expiresAt, #ttl = :ttl";
const RENEW_CONDITION: &str =
    "#owner = :owner AND #fencingToken = :fencingToken AND #expiresAt >= :now";

/// Frees the lock and records who released which grant, in the same write.
/// Grants and renewals leave the record alone, so a retried release whose first
/// attempt landed finds it even after another owner got in.
const RELEASE: &str = "REMOVE #owner, #acquiredAt, #expiresAt \
     SET #ttl = :ttl, #releasedBy = :owner, #releasedToken = #fencingToken, #releaseId = :releaseId";
/// Held by the caller, and not already released by this very call: a retry
/// whose first attempt landed must not free a grant the owner took since.
const RELEASE_CONDITION: &str =
    "#owner = :owner AND (attribute_not_exists(#releaseId) OR #releaseId <> :releaseId)";
/// The same, for the sweep: only a grant made before the execution ended.
const RELEASE_GRANTED_BEFORE_CONDITION: &str =
    "#owner = :owner AND (attribute_not_exists(#releaseId) OR #releaseId <> :releaseId) \
     AND #acquiredAt <= :grantedBefore";

/// A grant or renewal races with other writers only when the lock changes hands
/// between our two writes; after this many rounds something is badly wrong.
const MAX_ACQUIRE_ROUNDS: usize = 3;

pub(crate) type Item = HashMap<String, AttributeValue>;

enum WriteFailure {
    /// The condition did not hold; the item as it was (absent if there was none).
    ConditionFailed(Option<Item>),
    Store(StoreError),
}

/// A [`LockStore`] on one DynamoDB table.
#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table_name: String,
}

impl DynamoStore {
    pub fn new(client: Client, table_name: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table_name: table_name.into(),
        }
    }

    async fn conditional_update(
        &self,
        lock_name: &LockName,
        update: &str,
        condition: &str,
        names: &[&str],
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<Item, WriteFailure> {
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, AttributeValue::S(lock_name.as_str().to_owned()))
            .update_expression(update)
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for name in names {
            request = request.expression_attribute_names(format!("#{name}"), *name);
        }
        for (placeholder, value) in values {
            request = request.expression_attribute_values(placeholder, value);
        }
        match request.send().await {
            Ok(output) => Ok(output.attributes.unwrap_or_default()),
            Err(SdkError::ServiceError(failure))
                if matches!(
                    failure.err(),
                    UpdateItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                let old_item = match failure.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(error) => error.item,
                    _ => None,
                };
                Err(WriteFailure::ConditionFailed(old_item))
            }
            Err(error) => Err(WriteFailure::Store(classify("UpdateItem", error))),
        }
    }

    async fn grant(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        self.conditional_update(
            lock_name,
            GRANT,
            GRANT_CONDITION,
            &[OWNER, ACQUIRED_AT, EXPIRES_AT, TTL, FENCING_TOKEN],
            vec![
                (":owner", string(owner.as_str())),
                (":now", number(now.0)),
                (":expiresAt", number(expires_at.0)),
                (":ttl", number(gc_after(expires_at))),
                (":tokenBase", number(now.0.saturating_mul(1000))),
                (":one", number(1)),
            ],
        )
        .await
    }

    async fn renew(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        fencing_token: u64,
        expires_at: EpochMillis,
        now: EpochMillis,
    ) -> Result<Item, WriteFailure> {
        self.conditional_update(
            lock_name,
            RENEW,
            RENEW_CONDITION,
            &[OWNER, FENCING_TOKEN, EXPIRES_AT, TTL],
            vec![
                (":owner", string(owner.as_str())),
                (":fencingToken", number(fencing_token)),
                (":now", number(now.0)),
                (":expiresAt", number(expires_at.0)),
                (":ttl", number(gc_after(expires_at))),
            ],
        )
        .await
    }
    /// Release, optionally only of a grant made at or before `granted_before`.
    async fn release_where(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: Option<EpochMillis>,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        // The SDK retries this one request with the same id when an attempt's
        // answer is lost; the id tells that retry its own landed write apart.
        let release_id = release_id();
        let mut values = vec![
            (":owner", string(owner.as_str())),
            (":ttl", number(gc_after(now))),
            (":releaseId", string(&release_id)),
        ];
        let condition = match granted_before {
            None => RELEASE_CONDITION,
            Some(bound) => {
                values.push((":grantedBefore", number(bound.0)));
                RELEASE_GRANTED_BEFORE_CONDITION
            }
        };
        let result = self
            .conditional_update(
                lock_name,
                RELEASE,
                condition,
                &[
                    OWNER,
                    ACQUIRED_AT,
                    EXPIRES_AT,
                    TTL,
                    RELEASED_BY,
                    RELEASED_TOKEN,
                    FENCING_TOKEN,
                    RELEASE_ID,
                ],
                values,
            )
            .await;
        let old_item = match result {
            Ok(_) => return Ok(ReleaseOutcome::Released),
            Err(WriteFailure::Store(error)) => return Err(error),
            Err(WriteFailure::ConditionFailed(None)) => return Ok(ReleaseOutcome::NotHeld),
            Err(WriteFailure::ConditionFailed(Some(item))) => item,
        };
        let landed = old_item
            .get(RELEASE_ID)
            .and_then(|value| value.as_s().ok())
            .is_some_and(|id| *id == release_id);
        if landed {
            // An earlier attempt of this very call freed the lock; whoever
            // holds it now got it afterwards, with no overlap.
            Ok(ReleaseOutcome::Released)
        } else if old_item.contains_key(OWNER) {
            Ok(ReleaseOutcome::HeldByOther(holder_from(Some(&old_item))?))
        } else {
            Ok(ReleaseOutcome::NotHeld)
        }
    }
}

impl LockStore for DynamoStore {
    async fn acquire(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        now: EpochMillis,
    ) -> Result<AcquireOutcome, StoreError> {
        let expires_at = now.plus_seconds(lease.get());
        for _ in 0..MAX_ACQUIRE_ROUNDS {
            let old_item = match self.grant(lock_name, owner, expires_at, now).await {
                Ok(item) => {
                    return Ok(AcquireOutcome::Granted(lease_from(
                        lock_name, owner, &item,
                    )?))
                }
                Err(WriteFailure::Store(error)) => return Err(error),
                Err(WriteFailure::ConditionFailed(old_item)) => old_item,
            };
            // The grant failed, so the item has a live owner.
            let holder = holder_from(old_item.as_ref())?;
            if holder.owner != owner.as_str() {
                return Ok(AcquireOutcome::Held(holder));
            }
            // Our own live lease: a retried task or a deliberate renewal.
            match self
                .renew(lock_name, owner, holder.fencing_token, expires_at, now)
                .await
            {
                Ok(item) => {
                    return Ok(AcquireOutcome::Renewed(lease_from(
                        lock_name, owner, &item,
                    )?))
                }
                Err(WriteFailure::Store(error)) => return Err(error),
                // Our lease ended or changed between the two writes: decide afresh.
                Err(WriteFailure::ConditionFailed(_)) => continue,
            }
        }
        Err(StoreError::Unavailable(format!(
            "lock {lock_name:?} changed hands {MAX_ACQUIRE_ROUNDS} times during one acquire"
        )))
    }

    async fn release(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_where(lock_name, owner, None, now).await
    }

    async fn release_granted_before(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        granted_before: EpochMillis,
        now: EpochMillis,
    ) -> Result<ReleaseOutcome, StoreError> {
        self.release_where(lock_name, owner, Some(granted_before), now)
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
                let name = item
                    .get(LOCK_NAME)
                    .and_then(|value| value.as_s().ok())
                    .ok_or_else(|| malformed(LOCK_NAME))?;
                names.push(LockName::new(name.clone()).map_err(|_| malformed(LOCK_NAME))?);
            }
            // DynamoDB leaves LastEvaluatedKey out after the last page.
            match page.last_evaluated_key {
                Some(key) => start_key = Some(key),
                None => return Ok(names),
            }
        }
    }
}
