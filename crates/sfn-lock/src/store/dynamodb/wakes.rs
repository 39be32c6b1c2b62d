//! Wake-ups owed by earlier hand-offs (DESIGN.md, "Queue"): a hand-off
//! writes `wake:<id>` beside its grant and removes it once `SendTaskSuccess`
//! took; a marker still there means the waiter may sleep on a lock it holds
//! (the answer was lost, the call was cut short, the wake-up throttled).
//! Every pump sends those again first: release, acquire, the sweep and the
//! reconciler all pump.
//!
//! A repeated `SendTaskSuccess` on a task an earlier one completed is
//! answered like one on a dead task (`TaskTimedOut`), so a re-send never
//! takes a grant back: a closed answer leaves the grant with its waiter,
//! whose own Catch (its wait bound) or the sweep (its execution ended)
//! frees it. Before it sends, a pump claims the marker (`<seq>/<sends>/<nonce>`,
//! sends one higher, conditioned on the value it read): two pumps never send for one
//! claim, and the hand-off's own take-back, conditioned on the unclaimed
//! value, can no longer undo a grant whose waiter another pump woke.

use tracing::{info, warn};

use crate::ports::wake::WakeOutcome;
use crate::store::dynamodb::handoff::{granted_lease, holds, time_for_a_hand_off};
use crate::store::dynamodb::item::{gc_after, number, string};
use crate::store::dynamodb::permit_writes::permit_value;
use crate::store::dynamodb::permits::permit_names;
use crate::store::dynamodb::queue::{grant_output, pending_wakes, wake_nonce};
use crate::store::dynamodb::table::{
    DynamoStore, Item, Write, WriteFailure, ACQUIRED_AT, EXPIRES_AT, OWNER, TTL,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName};

/// A claim renews the handed grant too: a wake-up sent late (the reconciler,
/// minutes after a cut pump) must not hand over a lease that has run out.
/// Never earlier than it was (the owner may have renewed it since): from
/// the expiry as read, which the condition checks.
const CLAIM_MUTEX: &str = "SET #wake = :claimed, #expiresAt = :expiresAt, #ttl = :ttl";
const CLAIM_PERMIT: &str = "SET #wake = :claimed, #permit = :permit";
/// The marker as read, and still the very grant the hand-off made: handed
/// grants date from their request (`acquiredAt` = the waiter's
/// `enqueuedAt`), which no grant the owner took later by itself does.
/// A renewal since the read fails it: the owner's execution runs, and its
/// retried acquire wakes its own task (the marker is then stale).
const CLAIM_MUTEX_CONDITION: &str = "#wake = :seen AND #owner = :owner \
     AND #acquiredAt = :requestedAt AND #expiresAt = :heldUntil";
const CLAIM_PERMIT_CONDITION: &str = "#wake = :seen AND #permit.#acquiredAt = :requestedAt \
     AND #permit.#expiresAt = :heldUntil";
const CLEAR_WAKE: &str = "REMOVE #wake";
/// The marker as the caller read it: another pump has not moved it on.
const WAKE_AS_READ: &str = "#wake = :seen";

impl DynamoStore {
    /// Sends every wake-up the item's markers say is owed, oldest first,
    /// while Step Functions takes them; the item after, `None` if it is gone.
    pub(crate) async fn resend_wakes(
        &self,
        lock_name: &LockName,
        item: Item,
        now: EpochMillis,
    ) -> Result<Option<Item>, StoreError> {
        let name = lock_name.as_str();
        let Some(waker) = self.waker.clone() else {
            return Ok(Some(item));
        };
        let mut item = item;
        for pending in pending_wakes(&item)? {
            if !time_for_a_hand_off() {
                break;
            }
            let wake = pending.entry.wake_name();
            let waiter = self.read_waiter(&pending.entry).await?;
            let Some(waiter) = waiter.filter(|waiter| holds(&item, &waiter.owner).unwrap_or(false))
            else {
                // Its grant is gone (released, expired and taken over) or
                // its waiter item is: nobody is owed this wake-up any more.
                self.clear_wake(lock_name, &wake, &pending.value).await;
                continue;
            };
            let claimed = pending.claimed(&wake_nonce());
            // The grant the hand-off made: it dates from the waiter's request,
            // as the claim's condition says (no grant the owner took later).
            let still_handed = |item: &Item| -> Result<bool, StoreError> {
                Ok(holds(item, &waiter.owner)?
                    && granted_lease(lock_name, &waiter.owner, waiter.limit, item)?.acquired_at
                        == waiter.enqueued_at)
            };
            let held_until =
                granted_lease(lock_name, &waiter.owner, waiter.limit, &item)?.expires_at;
            let expires_at = now.plus_seconds(waiter.lease.get()).max(held_until);
            let owner = waiter.owner.as_str();
            let write = match waiter.limit.is_mutex() {
                true => Write::new(CLAIM_MUTEX, CLAIM_MUTEX_CONDITION)
                    .names(&[OWNER, ACQUIRED_AT, EXPIRES_AT, TTL])
                    .value(":owner", string(owner))
                    .value(":expiresAt", number(expires_at.0))
                    .value(":ttl", number(gc_after(expires_at))),
                false => Write::new(CLAIM_PERMIT, CLAIM_PERMIT_CONDITION)
                    .names(&[ACQUIRED_AT, EXPIRES_AT])
                    .name_as("#permit", &permit_names(owner).0)
                    .value(
                        ":permit",
                        permit_value(&waiter.owner, waiter.enqueued_at, expires_at),
                    ),
            }
            .name_as("#wake", &wake)
            .value(":claimed", string(&claimed))
            .value(":seen", string(&pending.value))
            .value(":requestedAt", number(waiter.enqueued_at.0))
            .value(":heldUntil", number(held_until.0));
            // Said on the outcome's line: one decision, one line.
            let mut claim_answer_lost = false;
            item = match self.conditional_update(name, write).await {
                Ok(next) => next,
                Err(WriteFailure::ConditionFailed(Some(next))) => {
                    let marker = next.get(&wake).and_then(|value| value.as_s().ok());
                    // This very claim landed with its answer lost (the SDK's
                    // retry then failed): its nonce is there. The item is as
                    // it is now, not as the claim left it, so the send is ours
                    // only while the grant is still the handed one (it may
                    // have run out and gone to another since).
                    let ours = marker == Some(&claimed) && still_handed(&next)?;
                    if ours {
                        claim_answer_lost = true;
                        next
                    } else {
                        // Another pump claimed it (the marker moved on), or the
                        // grant is no longer the handed one: the marker is stale.
                        if let Some(stale) =
                            marker.filter(|m| [&pending.value, &claimed].contains(m))
                        {
                            self.clear_wake(lock_name, &wake, stale).await;
                        }
                        item = next;
                        continue;
                    }
                }
                Err(WriteFailure::ConditionFailed(None)) => return Ok(None),
                Err(WriteFailure::Store(error)) => return Err(error),
            };
            let lease = granted_lease(lock_name, &waiter.owner, waiter.limit, &item)?;
            let output = grant_output(
                &lease,
                waiter.lease,
                waiter.limit,
                crate::vocab::model::Outcome::Granted,
            );
            match waker.wake(&waiter.token, output).await {
                WakeOutcome::Woken => {
                    info!(
                        lock_name = name,
                        owner,
                        claim_answer_lost,
                        sends = pending.sends + 1,
                        "woke a waiter an earlier hand-off had not"
                    );
                    self.clear_wake(lock_name, &wake, &claimed).await;
                    item.remove(&wake);
                    self.delete_waiter(&pending.entry, Some(&waiter.token))
                        .await;
                }
                WakeOutcome::Closed(detail) => {
                    // Woken before, or dead: nobody can tell. The grant stays.
                    info!(
                        lock_name = name,
                        owner,
                        claim_answer_lost,
                        error = detail,
                        "the waiter's task is closed (woken by an earlier wake-up, or ended); its grant stays"
                    );
                    self.clear_wake(lock_name, &wake, &claimed).await;
                    item.remove(&wake);
                }
                WakeOutcome::Refused(detail) => {
                    // Throttled: the next pump tries again; not more now.
                    warn!(
                        lock_name = name,
                        owner,
                        claim_answer_lost,
                        error = detail,
                        "Step Functions refused a wake-up again; the next pump sends it"
                    );
                    return Ok(Some(item));
                }
                WakeOutcome::Unknown(detail) => {
                    // Slow, perhaps: no more sends in this call, which has
                    // its own work to answer for.
                    warn!(
                        lock_name = name,
                        owner,
                        claim_answer_lost,
                        error = detail,
                        "whether a re-sent wake-up took is unknown; the next pump sends it again"
                    );
                    return Ok(Some(item));
                }
            }
        }
        Ok(Some(item))
    }

    /// Removes a wake marker that still has the value the caller read or
    /// wrote. Best effort: one left behind costs the next pump a read and a
    /// `SendTaskSuccess` that answers "closed", and changes no grant.
    pub(crate) async fn clear_wake(&self, lock_name: &LockName, wake: &str, value: &str) {
        let write = Write::new(CLEAR_WAKE, WAKE_AS_READ)
            .name_as("#wake", wake)
            .value(":seen", string(value));
        match self.conditional_update(lock_name.as_str(), write).await {
            Ok(_) | Err(WriteFailure::ConditionFailed(_)) => {}
            Err(WriteFailure::Store(error)) => {
                warn!(lock_name = lock_name.as_str(), %error,
                      "a wake marker stays; the next pump looks at it again");
            }
        }
    }
}
