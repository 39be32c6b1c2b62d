//! An acquire on DynamoDB: the rounds of writes one acquire makes (a mutex
//! grant, a permit, a renewal, pruning expired permits), each guarded by its
//! condition (`grant.rs`, `permit_writes.rs`, `renew.rs`).

use crate::store::dynamodb::item::lease_from;
use crate::store::dynamodb::permit_writes::PruneBatch;
use crate::store::dynamodb::permits::{decide, live_holders, permit_lease, Decision};
use crate::store::dynamodb::queue::{pending_wakes, queue_length};
use crate::store::dynamodb::queued::Core;
use crate::store::dynamodb::table::{DynamoStore, Item, WriteFailure, MAX_ACQUIRE_ROUNDS};
use crate::vocab::error::StoreError;
use crate::vocab::model::{AcquireOutcome, Contention, EpochMillis, LockName, Owner};
use crate::vocab::request::{LeaseSeconds, Limit};
use tracing::warn;

impl DynamoStore {
    /// Every acquire's rounds: grant, or renew the caller's own grant, or
    /// remove expired permits, or (with `queue`) join the queue; room that
    /// waiters are owed goes to them first.
    pub(crate) async fn acquire_core(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        lease: LeaseSeconds,
        limit: Limit,
        queue: bool,
        now: EpochMillis,
    ) -> Result<Core, StoreError> {
        let expires_at = now.plus_seconds(lease.get());
        let granted = |item: &Item| -> Result<Core, StoreError> {
            let lease = match limit.is_mutex() {
                true => lease_from(lock_name, owner, item)?,
                false => permit_lease(lock_name, owner, item)?,
            };
            Ok(Core::Done(AcquireOutcome::Granted(lease)))
        };
        // Rounds lost to other writers; a write that removed expired permits
        // without room to grant yet is progress, not a lost round.
        let mut lost_rounds = 0;
        while lost_rounds < MAX_ACQUIRE_ROUNDS {
            lost_rounds += 1;
            let first = match limit.is_mutex() {
                true => self.grant(lock_name, owner, expires_at, now, None).await,
                false => {
                    self.grant_permit(lock_name, owner, limit, expires_at, now, None)
                        .await
                }
            };
            let old_item = match first {
                Ok(item) => return granted(&item),
                Err(WriteFailure::Store(error)) => return Err(error),
                Err(WriteFailure::ConditionFailed(old_item)) => old_item,
            };
            let next = match decide(old_item.as_ref(), owner, limit, now)? {
                Decision::Held(contention) => {
                    if let Some(item) = old_item
                        .filter(|item| pending_wakes(item).is_ok_and(|pending| !pending.is_empty()))
                    {
                        // A holder may sleep on its grant: wake it first.
                        Box::pin(self.resend_wakes(lock_name, item, now)).await?;
                    }
                    match self
                        .refused(lock_name, owner, limit, contention, queue, now)
                        .await?
                    {
                        Some(core) => return Ok(core),
                        None => continue,
                    }
                }
                Decision::Again => {
                    let waiting = old_item.as_ref().map_or(Ok(0), queue_length)?;
                    let (Some(item), true) = (old_item, waiting > 0) else {
                        continue;
                    };
                    // Room, but owed to the waiters: hand it to them first.
                    let pumped = self.pump(lock_name, item, now).await?;
                    if let Some(lease) = pumped.handed.filter(|lease| lease.owner == *owner) {
                        if !pumped.woken {
                            // Its task sleeps on a grant it holds: the retry
                            // renews it and wakes the task itself.
                            return Err(StoreError::Unavailable(format!(
                                "lock {lock_name:?}: handed to the caller, but waking its task \
                                 failed; a retried acquire renews the grant and wakes it"
                            )));
                        }
                        return Ok(Core::HandedToCaller(lease));
                    }
                    // Waiters still ahead (the head did not fit): behind them.
                    let Some(item) = pumped
                        .item
                        .filter(|item| queue_length(item).is_ok_and(|n| n > 0))
                    else {
                        continue;
                    };
                    let holders = live_holders(&item, now)?;
                    let contention = Contention { limit, holders };
                    match self
                        .refused(lock_name, owner, limit, contention, queue, now)
                        .await?
                    {
                        Some(core) => return Ok(core),
                        None => continue,
                    }
                }
                // Our own live grant: a retried task or a deliberate renewal.
                renewal @ (Decision::RenewMutex { .. } | Decision::RenewPermit { .. }) => {
                    self.renew_held(lock_name, owner, renewal, expires_at, now)
                        .await
                }
                Decision::Prune {
                    seen_count,
                    expired,
                    grant,
                } => {
                    // Room made while waiters queue is theirs: prune, then hand off.
                    let grant = grant && old_item.as_ref().map_or(Ok(0), queue_length)? == 0;
                    for permit in &expired {
                        warn!(lock_name = lock_name.as_str(), owner = owner.as_str(),
                              expired_holder = %permit.holder.owner,
                              expired_at = %permit.holder.expires_at,
                              "removing a permit whose lease ran out (its holder may still run)");
                    }
                    let pruned = self
                        .prune(
                            lock_name,
                            owner,
                            PruneBatch {
                                seen_count,
                                expired: &expired,
                                grant,
                            },
                            limit,
                            expires_at,
                            now,
                        )
                        .await;
                    match pruned {
                        Ok(item) if grant => return granted(&item),
                        // Permits removed, not yet enough (a limit lowered by
                        // more than PRUNE_BATCH): go on removing.
                        Ok(_) => {
                            lost_rounds -= 1;
                            continue;
                        }
                        Err(WriteFailure::ConditionFailed(_)) => continue,
                        Err(WriteFailure::Store(error)) => return Err(error),
                    }
                }
            };
            match next {
                Ok(outcome) => return outcome,
                Err(WriteFailure::Store(error)) => return Err(error),
                // Our grant ended or changed between the two writes: decide afresh.
                Err(WriteFailure::ConditionFailed(_)) => continue,
            }
        }
        Err(StoreError::Unavailable(format!(
            "lock {lock_name:?} changed hands {MAX_ACQUIRE_ROUNDS} times during one acquire"
        )))
    }

    /// A caller the lock cannot admit now: it joins the queue (`queue`), or
    /// is answered with the live holders. `None`: decide again.
    async fn refused(
        &self,
        lock_name: &LockName,
        owner: &Owner,
        limit: Limit,
        contention: Contention,
        queue: bool,
        now: EpochMillis,
    ) -> Result<Option<Core>, StoreError> {
        if queue {
            let joined = self.join_queue(lock_name, owner, limit, contention, now);
            return Ok(joined.await?.map(Core::Done));
        }
        // No live holder to name: the item changed since, decide again.
        if contention.holders.is_empty() {
            return Ok(None);
        }
        Ok(Some(Core::Done(AcquireOutcome::Held(contention))))
    }
}
