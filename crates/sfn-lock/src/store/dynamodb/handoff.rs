//! Handing a freed permit to the oldest waiter (DESIGN.md, "Queue"): one
//! conditional write makes the head of the queue the holder, takes it out of
//! the queue and leaves the marker of an unconfirmed wake-up (`wake:<id>`);
//! then `SendTaskSuccess` wakes it with its grant, and a second write removes
//! the marker. A marker left behind (the answer lost, the call cut short,
//! the wake-up throttled) is sent again by the next pump
//! (`store/dynamodb/wakes.rs`), so no handed waiter sleeps on a free lock.

use std::time::Duration;

use tracing::{info, warn};

use crate::ports::wake::WakeOutcome;
use crate::store::dynamodb::grant::HandOff;
use crate::store::dynamodb::item::lease_from;
use crate::store::dynamodb::permit_writes::PruneBatch;
use crate::store::dynamodb::permits::{decide, permit_lease, permit_of, Decision};
use crate::store::dynamodb::queue::{
    grant_output, pending_wakes, queue_of, wake_nonce, MAX_PENDING_WAKES,
};
use crate::store::dynamodb::table::{DynamoStore, Item, WriteFailure, OWNER};
use crate::vocab::deadline::time_left;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, Lease, LockName, Owner};
use crate::vocab::request::Limit;

/// Passes over the queue one call makes (a hand-off, a dead waiter skipped,
/// expired holders pruned) before it gives up with a store error, so that
/// Step Functions retries the release and the retry goes on. The deadline
/// guard cuts a call sooner if the store is slow.
pub const MAX_HAND_OFFS: usize = 8;

/// Time a hand-off needs to be worth starting: a wake-up's two attempts at
/// their 2 s timeout and pauses (4.3 s), and the store's calls on a healthy
/// store. One cut short is not lost (its marker is sent again), but a call
/// near its deadline leaves the rest to the next pump rather than be cut by
/// the deadline guard, which would fail the call that freed the room.
pub const MIN_HAND_OFF_TIME: Duration = Duration::from_secs(5);

/// What a pass over the queue did: the grant it handed to a woken (or
/// possibly woken) waiter, whether that waiter's wake-up was confirmed, and
/// the item as last seen.
pub(crate) struct Pumped {
    pub handed: Option<Lease>,
    pub woken: bool,
    pub item: Option<Item>,
}

/// Whether `owner` holds a grant on the item, in either format.
pub(crate) fn holds(item: &Item, owner: &Owner) -> Result<bool, StoreError> {
    let mutex = item
        .get(OWNER)
        .and_then(|value| value.as_s().ok())
        .is_some_and(|holder| holder == owner.as_str());
    Ok(mutex || permit_of(item, owner)?.is_some())
}

/// The grant `owner` holds on the item, in the format of `limit`.
pub(crate) fn granted_lease(
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

/// Whether a call still has time for one more hand-off.
pub(crate) fn time_for_a_hand_off() -> bool {
    time_left().is_none_or(|left| left >= MIN_HAND_OFF_TIME)
}

impl DynamoStore {
    /// Sends the wake-ups earlier hand-offs owe first, then hands room on the
    /// lock to the oldest waiters, in order, until the head does not fit, one
    /// is woken, the queue is empty or the call runs out of time.
    pub(crate) async fn pump(
        &self,
        lock_name: &LockName,
        item: Item,
        now: EpochMillis,
    ) -> Result<Pumped, StoreError> {
        let name = lock_name.as_str();
        let done = |item| {
            Ok(Pumped {
                handed: None,
                woken: false,
                item,
            })
        };
        let Some(waker) = self.waker.clone() else {
            warn!(
                lock_name = name,
                "waiters are queued but this function cannot wake them (no Step Functions client)"
            );
            return done(Some(item));
        };
        // Boxed, as the other nested store futures: the binaries' async
        // layouts otherwise exceed rustc's query depth.
        let Some(mut item) = Box::pin(self.resend_wakes(lock_name, item, now)).await? else {
            return done(None);
        };
        if pending_wakes(&item)?.len() >= MAX_PENDING_WAKES {
            // Earlier hand-offs still wait for their wake-up: they come first.
            return done(Some(item));
        }
        for _ in 0..MAX_HAND_OFFS {
            let Some(head) = queue_of(&item)?.into_iter().next() else {
                return done(Some(item));
            };
            if !time_for_a_hand_off() {
                info!(
                    lock_name = name,
                    "no time left for another hand-off; the next pump goes on"
                );
                return done(Some(item));
            }
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
            // This hand-off's own: only the SDK's retry of this very write
            // sends it again, so only that retry's failure reads as ours.
            let nonce = wake_nonce();
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
                    let batch = PruneBatch {
                        seen_count,
                        expired: expired.as_slice(),
                        grant: false,
                    };
                    let limit = waiter.limit;
                    self.prune(lock_name, &waiter.owner, batch, limit, expires_at, now)
                        .await
                }
                Decision::Again => {
                    hand_off = true;
                    let place = Some(HandOff {
                        entry: &head,
                        requested_at: waiter.enqueued_at,
                        nonce: nonce.as_str(),
                    });
                    let who = &waiter.owner;
                    match waiter.limit.is_mutex() {
                        true => self.grant(lock_name, who, expires_at, now, place).await,
                        false => {
                            self.grant_permit(lock_name, who, waiter.limit, expires_at, now, place)
                                .await
                        }
                    }
                }
            };
            let (wake, fresh) = (head.wake_name(), head.fresh_wake(&nonce));
            item = match written {
                Ok(next) => next,
                Err(WriteFailure::ConditionFailed(Some(next))) => {
                    // This very hand-off may have landed with its answer lost
                    // (the SDK then retried it, and the retry failed): its
                    // unclaimed marker says so, and the waiter is still owed
                    // its wake-up.
                    hand_off = hand_off
                        && next.get(&wake).and_then(|value| value.as_s().ok()) == Some(&fresh)
                        && holds(&next, &waiter.owner)?;
                    if hand_off {
                        info!(
                            lock_name = name,
                            owner, "the hand-off had landed; waking its waiter"
                        );
                    }
                    next
                }
                Err(WriteFailure::ConditionFailed(None)) => return done(None),
                Err(WriteFailure::Store(error)) => return Err(error),
            };
            if !hand_off {
                continue;
            }
            let lease = granted_lease(lock_name, &waiter.owner, waiter.limit, &item)?;
            let output = grant_output(
                &lease,
                waiter.lease,
                waiter.limit,
                crate::vocab::model::Outcome::Granted,
            );
            let handed = |woken, item| {
                Ok(Pumped {
                    handed: Some(lease.clone()),
                    woken,
                    item: Some(item),
                })
            };
            match waker.wake(&waiter.token, output).await {
                WakeOutcome::Woken => {
                    info!(
                        lock_name = name,
                        owner,
                        fencing_token = lease.fencing_token,
                        waited_ms = now.0 - waiter.enqueued_at.0,
                        "lock handed to the oldest waiter"
                    );
                    Box::pin(self.clear_wake(lock_name, &wake, &fresh)).await;
                    Box::pin(self.delete_waiter(&head, Some(&waiter.token))).await;
                    return handed(true, item);
                }
                WakeOutcome::Closed(detail) => {
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "the waiter's task had ended; its grant is taken back for the next waiter"
                    );
                    let marker = Some((wake.as_str(), fresh.as_str()));
                    match self
                        .take_back(lock_name, &lease, waiter.limit, marker)
                        .await?
                    {
                        Some(next) => item = next,
                        None => return done(None),
                    }
                }
                WakeOutcome::Refused(detail) => {
                    // Nothing landed and the waiter lives: the grant stays with
                    // it, and its marker has the next pump (a release, an
                    // acquire, the sweep, the reconciler) send it again. The
                    // call that freed the room has done its part: no error.
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "lock handed, but Step Functions refused the wake-up; the next pump sends it again"
                    );
                    return handed(false, item);
                }
                WakeOutcome::Unknown(detail) => {
                    // It may run: its grant stays, and so does the marker.
                    warn!(
                        lock_name = name,
                        owner,
                        error = detail,
                        "lock handed, but whether the waiter was woken is unknown; the grant stays"
                    );
                    return handed(false, item);
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "lock {name:?}: {MAX_HAND_OFFS} hand-offs in one call reached no live waiter; \
             a retried call goes on"
        )))
    }
}
