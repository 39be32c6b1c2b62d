//! Handing a freed permit to the oldest waiter (DESIGN.md, "Queue"): one
//! conditional write makes the head of the queue the holder and takes it out
//! of the queue, then `SendTaskSuccess` wakes it with its grant.

use tracing::{info, warn};

use crate::dynamodb::*;
use crate::dynamodb_item::{lease_from, number, release_id, string};
use crate::dynamodb_permit_writes::RELEASE_PERMIT;
use crate::dynamodb_permits::{decide, permit_lease, permit_names, Decision};
use crate::dynamodb_queue::*;
use crate::error::StoreError;
use crate::model::{EpochMillis, Lease, LockName, Owner};
use crate::queue::WakeOutcome;
use crate::request::Limit;

/// Passes over the queue one call makes (a hand-off, a dead waiter skipped,
/// expired holders pruned) before it gives up with a store error, so that
/// Step Functions retries the release and the retry goes on. The deadline
/// guard cuts a call sooner if the store is slow.
pub const MAX_HAND_OFFS: usize = 8;

/// Takes a handed grant back from a waiter whose task had ended, only while
/// it is still that grant, unrenewed: had anything else woken the waiter
/// since (its own retried acquire renews before it wakes), it runs.
const TAKE_BACK_MUTEX_CONDITION: &str =
    "#owner = :owner AND #fencingToken = :fencingToken AND #expiresAt = :expiresAt";
const TAKE_BACK_PERMIT_CONDITION: &str =
    "#token = :fencingToken AND #permit.#expiresAt = :expiresAt";

/// What a pass over the queue did: the grant it handed to a woken (or
/// possibly woken) waiter, and the item as last seen.
pub(crate) struct Pumped {
    pub handed: Option<Lease>,
    pub item: Option<Item>,
}

impl DynamoStore {
    /// Hands room on the lock to the oldest waiters, in order, until the
    /// head does not fit, one is woken, or the queue is empty.
    pub(crate) async fn pump(
        &self,
        lock_name: &LockName,
        item: Item,
        now: EpochMillis,
    ) -> Result<Pumped, StoreError> {
        let name = lock_name.as_str();
        let Some(waker) = self.waker.clone() else {
            warn!(
                lock_name = name,
                "waiters are queued but this function cannot wake them (no Step Functions client)"
            );
            return Ok(Pumped {
                handed: None,
                item: Some(item),
            });
        };
        let mut item = item;
        for _ in 0..MAX_HAND_OFFS {
            let done = |item| Ok(Pumped { handed: None, item });
            let Some(head) = queue_of(&item)?.into_iter().next() else {
                return done(Some(item));
            };
            let Some(waiter) = self.read_waiter(&head).await? else {
                warn!(
                    lock_name = name,
                    entry = head.name,
                    "dropped a queue entry whose waiter item is gone"
                );
                match self.drop_entry(lock_name, &head).await {
                    Ok(next) | Err(WriteFailure::ConditionFailed(Some(next))) => item = next,
                    Err(WriteFailure::ConditionFailed(None)) => return done(None),
                    Err(WriteFailure::Store(error)) => return Err(error),
                }
                continue;
            };
            let owner = waiter.owner.as_str();
            let expires_at = now.plus_seconds(waiter.lease.get());
            let mut hand_off = false;
            let written = match decide(Some(&item), &waiter.owner, waiter.limit, now)? {
                // The head does not fit yet: the next release comes back.
                Decision::Held(_) => return done(Some(item)),
                Decision::RenewMutex { .. } | Decision::RenewPermit { .. } => {
                    warn!(
                        lock_name = name,
                        owner, "dropped a queue entry whose owner already holds the lock"
                    );
                    self.drop_entry(lock_name, &head).await
                }
                // Expired holders make the room: remove them, then hand off.
                Decision::Prune {
                    seen_count,
                    expired,
                    ..
                } => {
                    let batch = (seen_count, expired.as_slice(), false);
                    let limit = waiter.limit.get();
                    self.prune(lock_name, &waiter.owner, batch, limit, expires_at, now)
                        .await
                }
                Decision::Again => {
                    hand_off = true;
                    let (place, who) = (Some((&head, waiter.enqueued_at)), &waiter.owner);
                    match waiter.limit.is_mutex() {
                        true => self.grant(lock_name, who, expires_at, now, place).await,
                        false => {
                            let limit = waiter.limit.get();
                            self.grant_permit(lock_name, who, limit, expires_at, now, place)
                                .await
                        }
                    }
                }
            };
            item = match written {
                Ok(next) => next,
                Err(WriteFailure::ConditionFailed(Some(next))) => {
                    hand_off = false;
                    next
                }
                Err(WriteFailure::ConditionFailed(None)) => return done(None),
                Err(WriteFailure::Store(error)) => return Err(error),
            };
            if !hand_off {
                continue;
            }
            let lease = granted_lease(lock_name, &waiter.owner, waiter.limit, &item)?;
            let output = grant_output(&lease, waiter.lease, waiter.limit, "granted");
            match waker.wake(&waiter.token, output).await {
                WakeOutcome::Woken => {
                    info!(
                        lock_name = name,
                        owner,
                        fencing_token = lease.fencing_token,
                        waited_ms = now.0 - waiter.enqueued_at.0,
                        "lock handed to the oldest waiter"
                    );
                    return Ok(Pumped {
                        handed: Some(lease),
                        item: Some(item),
                    });
                }
                WakeOutcome::Closed(detail) => {
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "the waiter's task had ended; its grant is taken back for the next waiter"
                    );
                    match self
                        .take_back(lock_name, &lease, waiter.limit, None)
                        .await?
                    {
                        Some(next) => item = next,
                        None => return done(None),
                    }
                }
                WakeOutcome::Refused(detail) => {
                    // Nothing landed and the waiter lives: it keeps its place,
                    // and the caller's retry (Step Functions', the queue's)
                    // wakes it.
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "Step Functions refused to wake the waiter; it keeps its place"
                    );
                    let back = self.take_back(lock_name, &lease, waiter.limit, Some(&head));
                    if back
                        .await?
                        .is_some_and(|item| item.contains_key(&head.name))
                    {
                        return Err(StoreError::Unavailable(format!(
                            "lock {name:?}: waking the oldest waiter was refused ({detail}); \
                             it keeps its place, and a retried call wakes it"
                        )));
                    }
                    // The grant changed meanwhile (the waiter's own retried
                    // acquire renewed it and woke itself): it stays.
                    return done(None);
                }
                WakeOutcome::Unknown(detail) => {
                    // It may run: its grant stays. Not woken, its task times out
                    // and its Catch releases (DESIGN.md, "Queue").
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "lock handed, but whether the waiter was woken is unknown; the grant stays"
                    );
                    return Ok(Pumped {
                        handed: Some(lease),
                        item: Some(item),
                    });
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "lock {name:?}: {MAX_HAND_OFFS} hand-offs in one call reached no live waiter; \
             a retried call goes on"
        )))
    }

    /// Frees a grant just made for a waiter whose task had ended, or, with
    /// `back_to`, for a live waiter Step Functions refused to wake, which goes
    /// back to its place in the queue in the same write. The item after, or
    /// the item as found if the grant changed (then it stays).
    pub(crate) async fn take_back(
        &self,
        lock_name: &LockName,
        lease: &Lease,
        limit: Limit,
        back_to: Option<&Entry>,
    ) -> Result<Option<Item>, StoreError> {
        let owner = lease.owner.as_str();
        let (permit, token) = permit_names(owner);
        let mut write = match limit.is_mutex() {
            true => Write::new(RELEASE, TAKE_BACK_MUTEX_CONDITION).names(RELEASE_NAMES),
            false => Write::new(RELEASE_PERMIT, TAKE_BACK_PERMIT_CONDITION)
                .names(&[
                    HOLDER_COUNT,
                    RELEASED_BY,
                    RELEASED_TOKEN,
                    RELEASE_ID,
                    EXPIRES_AT,
                ])
                .name_as("#permit", &permit)
                .name_as("#token", &token)
                .value(":one", number(1)),
        }
        .value(":owner", string(owner))
        .value(":fencingToken", number(lease.fencing_token))
        .value(":expiresAt", number(lease.expires_at.0))
        .value(
            ":ttl",
            number(crate::dynamodb_item::gc_after(lease.expires_at)),
        )
        .value(":releaseId", string(&release_id()));
        if let Some(entry) = back_to {
            // RELEASE and RELEASE_PERMIT both end in their SET clause.
            write.update +=
                ", #entry = :seq, #queueLength = if_not_exists(#queueLength, :zero) + :one";
            write.condition += " AND attribute_not_exists(#entry)";
            write = write
                .names(&[QUEUE_LENGTH])
                .name_as("#entry", &entry.name)
                .value(":seq", number(entry.seq))
                .value(":zero", number(0))
                .value(":one", number(1));
        }
        match self
            .conditional_update(lock_name.as_str(), write.without_unused())
            .await
        {
            Ok(item) => Ok(Some(item)),
            Err(WriteFailure::ConditionFailed(item)) => {
                warn!(
                    lock_name = lock_name.as_str(),
                    owner, "a handed grant changed before it could be taken back; it stays"
                );
                Ok(item)
            }
            Err(WriteFailure::Store(error)) => Err(error),
        }
    }
}

fn granted_lease(
    lock_name: &LockName,
    owner: &Owner,
    limit: Limit,
    item: &Item,
) -> Result<Lease, StoreError> {
    match limit.is_mutex() {
        true => lease_from(lock_name, owner, item),
        false => permit_lease(lock_name, owner, item),
    }
}
