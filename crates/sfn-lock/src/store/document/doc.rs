//! A lock as one small JSON document, for the stores whose only atomic step is
//! "write this whole document if the stored one is still the one I read" (S3's
//! `If-Match`, SSM's next generation created with `Overwrite=false`). This file
//! decides, from the document read, what to write and what to answer; it
//! reads and writes nothing itself, so every rule here is tested without a store.

use serde::{Deserialize, Serialize};

use crate::store::ids::token_base;
use crate::store::names::owner_hash;
use crate::vocab::model::{
    AcquireOutcome, Contention, EpochMillis, Holder, Lease, LockName, Owner, ReleaseOutcome,
};
use crate::vocab::request::{LeaseSeconds, Limit};

/// Release records kept for answering a retried release exactly: a retry
/// comes within seconds, long before eight more releases of one lock.
pub const RELEASE_RECORDS: usize = 8;

/// The lock's whole state. Field names are the stored format: change them
/// only with a new `format`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockDoc {
    pub format: u32,
    /// The last fencing token granted; every grant takes the next.
    pub fencing_token: u64,
    pub holders: Vec<DocHolder>,
    /// The newest last.
    pub releases: Vec<DocRelease>,
    /// When this version was written (SSM keeps old generations by it).
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocHolder {
    pub owner: String,
    pub acquired_at: i64,
    pub expires_at: i64,
    pub fencing_token: u64,
    /// The limit it was granted under: a holder with limit 1 holds a mutex,
    /// which admits nobody beside it.
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocRelease {
    /// [`owner_hash`] of who released: a record must stay small (SSM values
    /// hold 4 KB) and is only ever compared with a caller.
    pub owner_hash: String,
    pub fencing_token: u64,
    pub release_id: String,
}

/// What an acquire does with the document it read.
#[derive(Debug, PartialEq, Eq)]
pub enum AcquireStep {
    /// Write the new document; if that write wins, answer the outcome.
    Write(LockDoc, AcquireOutcome),
    /// Nothing to write: others hold every permit.
    Held(Contention),
}

/// What a release does with the document it read.
#[derive(Debug, PartialEq, Eq)]
pub enum ReleaseStep {
    /// Write the document without the caller's grant, then answer `released`.
    Write(LockDoc),
    /// Nothing to write; the answer is decided.
    Answer(ReleaseOutcome),
}

fn live(holder: &DocHolder, now: EpochMillis) -> bool {
    holder.expires_at >= now.0
}

fn lease_of(lock_name: &LockName, owner: &Owner, holder: &DocHolder) -> Lease {
    Lease {
        lock_name: lock_name.clone(),
        owner: owner.clone(),
        fencing_token: holder.fencing_token,
        acquired_at: EpochMillis(holder.acquired_at),
        expires_at: EpochMillis(holder.expires_at),
    }
}

/// Who released last, as [`Holder::follows_release_by`] compares it: the
/// caller's own name if the record is the caller's, else the record's hash.
fn last_release(doc: &LockDoc, owner: &Owner) -> Option<(String, u64)> {
    doc.releases.last().map(|r| {
        let by = match r.owner_hash == owner_hash(owner.as_str()) {
            true => owner.as_str().to_string(),
            false => format!("sha256:{}", r.owner_hash),
        };
        (by, r.fencing_token)
    })
}

/// Grant (free permit, or the caller's own lease ran out), renew (the
/// caller's live lease; the token stays), or report the live holders.
pub fn decide_acquire(
    doc: Option<&LockDoc>,
    (lock_name, owner): (&LockName, &Owner),
    lease: LeaseSeconds,
    limit: Limit,
    now: EpochMillis,
) -> AcquireStep {
    let mut next = doc.cloned().unwrap_or_default();
    next.format = 1;
    next.updated_at = now.0;
    let expires_at = now.plus_seconds(lease.get()).0;
    let mine = next.holders.iter().position(|h| h.owner == owner.as_str());
    if let Some(index) = mine.filter(|&index| live(&next.holders[index], now)) {
        let holder = &mut next.holders[index];
        // Never earlier than it was: a renewal from a clock behind (a retried
        // task whose first attempt ran on) must not cut short the lease its
        // holder was told, or a rival gets in beside it.
        holder.expires_at = holder.expires_at.max(expires_at);
        let lease = lease_of(lock_name, owner, holder);
        return AcquireStep::Write(next, AcquireOutcome::Renewed(lease));
    }
    let mut others: Vec<&DocHolder> = next
        .holders
        .iter()
        .filter(|h| h.owner != owner.as_str() && live(h, now))
        .collect();
    // A mutex holder admits nobody beside it; otherwise the caller's limit counts.
    if others.len() >= limit.get() as usize || others.iter().any(|h| h.limit == 1) {
        others.sort_by_key(|h| h.expires_at);
        let last_release = last_release(&next, owner);
        let holders = others
            .iter()
            .map(|h| Holder {
                owner: h.owner.clone(),
                fencing_token: h.fencing_token,
                expires_at: EpochMillis(h.expires_at),
                last_release: last_release.clone(),
            })
            .collect();
        return AcquireStep::Held(Contention { limit, holders });
    }
    // Expired holders (the caller's own included) lose their permits now.
    next.holders
        .retain(|h| live(h, now) && h.owner != owner.as_str());
    // Tokens count on from the grant time in microseconds at least, so a
    // document made anew (deleted, or first written by a release's
    // confirmation) still issues higher tokens than any before (DESIGN.md).
    let base = u64::try_from(token_base(now)).unwrap_or(0);
    next.fencing_token = base.max(next.fencing_token) + 1;
    let holder = DocHolder {
        owner: owner.as_str().to_string(),
        acquired_at: now.0,
        expires_at,
        fencing_token: next.fencing_token,
        limit: limit.get(),
    };
    let lease = lease_of(lock_name, owner, &holder);
    next.holders.push(holder);
    AcquireStep::Write(next, AcquireOutcome::Granted(lease))
}

/// Frees the caller's grant if it holds one (made at or before
/// `granted_before`, for the sweep); the answer follows the DynamoDB store's
/// table in DESIGN.md ("A release whose answer was lost").
pub fn decide_release(
    doc: Option<&LockDoc>,
    owner: &Owner,
    release_id: &str,
    granted_before: Option<EpochMillis>,
    now: EpochMillis,
) -> ReleaseStep {
    let Some(doc) = doc else {
        return ReleaseStep::Answer(ReleaseOutcome::NotHeld);
    };
    let caller_hash = owner_hash(owner.as_str());
    let last_release = last_release(doc, owner);
    let holder_of = |h: &DocHolder| Holder {
        owner: h.owner.clone(),
        fencing_token: h.fencing_token,
        expires_at: EpochMillis(h.expires_at),
        last_release: last_release.clone(),
    };
    // An earlier attempt of this very call landed and its answer was lost.
    // Checked first, as DynamoDB checks its `releaseId`: a grant of the
    // caller's found now was made after that release (the same owner acquired
    // again meanwhile) and is not this call's to free.
    if doc.releases.iter().any(|r| r.release_id == release_id) {
        return ReleaseStep::Answer(ReleaseOutcome::Released);
    }
    if let Some(mine) = doc.holders.iter().find(|h| h.owner == owner.as_str()) {
        // The sweep's guard: a later grant of the same owner stays.
        if granted_before.is_some_and(|before| mine.acquired_at > before.0) {
            return ReleaseStep::Answer(ReleaseOutcome::HeldByOther(holder_of(mine)));
        }
        let mut next = doc.clone();
        next.updated_at = now.0;
        next.holders.retain(|h| h.owner != owner.as_str());
        next.releases.push(DocRelease {
            owner_hash: caller_hash,
            fencing_token: mine.fencing_token,
            release_id: release_id.to_string(),
        });
        let surplus = next.releases.len().saturating_sub(RELEASE_RECORDS);
        next.releases.drain(..surplus);
        return ReleaseStep::Write(next);
    }
    // A mutex taken over names its holder; a semaphore's other permits do not
    // concern the caller.
    match doc.holders.iter().find(|h| h.limit == 1) {
        Some(holder) => ReleaseStep::Answer(ReleaseOutcome::HeldByOther(holder_of(holder))),
        None => ReleaseStep::Answer(ReleaseOutcome::NotHeld),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release by call `call-1` freed `me`'s grant (token 1), and `me`
    /// acquired again at 2_000 (token 2) before that call read again; the
    /// call (or another, `call-2`) now decides at 3_000.
    fn decide_after_regrant(release_id: &str, granted_before: Option<i64>) -> ReleaseStep {
        let me = Owner::new("arn:me").unwrap();
        let doc = LockDoc {
            format: 1,
            fencing_token: 2,
            holders: vec![DocHolder {
                owner: me.to_string(),
                acquired_at: 2_000,
                expires_at: 62_000,
                fencing_token: 2,
                limit: 1,
            }],
            releases: vec![DocRelease {
                owner_hash: owner_hash(me.as_str()),
                fencing_token: 1,
                release_id: "call-1".into(),
            }],
            updated_at: 2_000,
        };
        let before = granted_before.map(EpochMillis);
        decide_release(Some(&doc), &me, release_id, before, EpochMillis(3_000))
    }

    #[test]
    fn a_release_that_landed_leaves_its_owners_later_grant() {
        // Issue 23: the holder was checked before the call's own record, so
        // the retry freed the grant its owner took after the first attempt.
        for granted_before in [None, Some(1_000)] {
            assert_eq!(
                decide_after_regrant("call-1", granted_before),
                ReleaseStep::Answer(ReleaseOutcome::Released),
                "granted_before {granted_before:?}"
            );
        }
    }

    #[test]
    fn another_call_of_the_same_owner_still_frees_its_grant() {
        // The record is another call's: this call frees the grant it finds.
        let ReleaseStep::Write(next) = decide_after_regrant("call-2", None) else {
            panic!("expected a write");
        };
        assert!(next.holders.is_empty());
        let ids: Vec<&str> = next
            .releases
            .iter()
            .map(|r| r.release_id.as_str())
            .collect();
        assert_eq!(ids, ["call-1", "call-2"]);
        // The sweep's guard: a grant made after `granted_before` stays.
        assert_eq!(
            decide_after_regrant("call-2", Some(1_000)),
            ReleaseStep::Answer(ReleaseOutcome::HeldByOther(Holder {
                owner: "arn:me".into(),
                fencing_token: 2,
                expires_at: EpochMillis(62_000),
                last_release: Some(("arn:me".into(), 1)),
            }))
        );
    }
}
