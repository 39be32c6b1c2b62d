//! The SSM store's bookkeeping of generations, as pure logic: which old
//! generations a writer may delete, and the envelope each generation's
//! parameter holds (the lock's document plus that bookkeeping).
//!
//! Every time here is the service's own (`aws/service_clock.rs`): a parameter's
//! `LastModifiedDate` and the `Date` of an answer. No caller's clock or delay
//! decides a deletion.
//!
//! A checkpoint `(g, at)` records that generation `g` existed at `at` (its
//! `LastModifiedDate`, as its successor's writer read it): every generation
//! below `g` was superseded by then. A writer whose read was answered at
//! `read_at` deletes below the newest checkpoint with
//! `read_at - at > KEEP_SUPERSEDED_MILLIS`. A writer that read generation
//! `n` as the newest and creates `n + 1` after `n + 1` was deleted must have
//! created it more than that time after its own read (DESIGN.md, "SSM
//! store"): the store refuses to answer for any create that landed more than
//! [`WRITE_WINDOW_MILLIS`] after its read.

use serde::{Deserialize, Serialize};

use crate::store::document::doc::LockDoc;

/// How long a superseded generation is kept.
pub const KEEP_SUPERSEDED_MILLIS: i64 = 5 * 60 * 1000;
/// A create that lands (by the `Date` of its answer) later than this after
/// the read it was decided on is not answered for: the change may have
/// landed beside the chain instead of on it. Kept well under
/// [`KEEP_SUPERSEDED_MILLIS`]: the rest covers a stale read and the two
/// `Date`s' whole seconds.
pub const WRITE_WINDOW_MILLIS: i64 = 2 * 60 * 1000;
/// Generations one write deletes at most (five `DeleteParameters` calls); a
/// backlog drains over the next writes.
pub const MAX_DELETIONS_PER_WRITE: u64 = 50;
/// Checkpoints an envelope keeps: dropping the oldest only delays deletions,
/// and a parameter's 4 KB stays enough while deletions keep failing.
pub const MAX_CHECKPOINTS: usize = 8;
/// Generations a lock whose deletions fail keeps at most before it refuses
/// everything but releases: bounded by construction when `DeleteParameters` keeps failing
/// (a denying policy), so one lock can never fill the account's 10,000
/// parameters. (A busy lock whose deletions work may keep more for five
/// minutes: about one per change.)
pub const MAX_KEPT_GENERATIONS: u64 = 100;

/// What one generation's parameter holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// This generation's number (also in its name; here for `current`).
    pub generation: u64,
    /// The oldest generation that may still exist.
    pub tail: u64,
    /// `(generation, LastModifiedDate)`, oldest first; [`MAX_CHECKPOINTS`] at most.
    pub checkpoints: Vec<(u64, i64)>,
    pub lock: LockDoc,
    /// The `Date` of the read its writer decided on: a generation whose
    /// `LastModifiedDate` is later than the write window after it landed late,
    /// perhaps beside the chain, and is trusted only after a listing
    /// (`store/document/ssm/read.rs`). Absent in generations written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<i64>,
}

/// The generation a write read as the newest, with the service's times.
#[derive(Clone, Copy, Debug)]
pub struct Base<'a> {
    pub envelope: &'a Envelope,
    /// Its `LastModifiedDate`.
    pub modified_at: i64,
    /// The `Date` of the answer the read began with.
    pub read_at: i64,
}

/// The envelope of the generation after `base` (`None`: the first), and the
/// generations its writer deletes before its create: `tail..new tail`.
/// With `delete` false, nothing is deleted (a deletion failed): the tail stays.
pub fn next_envelope(
    base: Option<Base<'_>>,
    lock: LockDoc,
    delete: bool,
) -> (Envelope, std::ops::Range<u64>) {
    let Some(Base {
        envelope: previous,
        modified_at,
        read_at,
    }) = base
    else {
        let first = Envelope {
            generation: 1,
            tail: 1,
            checkpoints: Vec::new(),
            lock,
            read_at: None,
        };
        return (first, 1..1);
    };
    let generation = previous.generation + 1;
    let mut checkpoints = previous.checkpoints.clone();
    // Everything below the newest checkpoint old enough may go.
    let deletable_below = checkpoints
        .iter()
        .rev()
        .find(|(_, at)| read_at - *at > KEEP_SUPERSEDED_MILLIS)
        .map_or(previous.tail, |(checkpoint, _)| *checkpoint);
    let new_tail = match delete {
        true => deletable_below
            .min(previous.tail + MAX_DELETIONS_PER_WRITE)
            .max(previous.tail),
        false => previous.tail,
    };
    checkpoints.retain(|(checkpoint, _)| *checkpoint >= new_tail);
    let due = checkpoints
        .last()
        .is_none_or(|(_, at)| modified_at - *at >= KEEP_SUPERSEDED_MILLIS / 4);
    if due {
        checkpoints.push((previous.generation, modified_at));
    }
    let surplus = checkpoints.len().saturating_sub(MAX_CHECKPOINTS);
    checkpoints.drain(..surplus);
    let next = Envelope {
        generation,
        tail: new_tail,
        checkpoints,
        lock,
        read_at: None,
    };
    (next, previous.tail..new_tail)
}

/// Whether a lock keeps so many generations that it takes no new grant.
pub fn backlog_full(next: &Envelope) -> bool {
    next.generation - next.tail >= MAX_KEPT_GENERATIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = KEEP_SUPERSEDED_MILLIS;

    /// Writes one generation per `(modified_at of the one read, read_at)`.
    fn chain(times: &[(i64, i64)], delete: bool) -> (Envelope, Vec<std::ops::Range<u64>>) {
        let (mut envelope, _) = next_envelope(None, LockDoc::default(), delete);
        let mut deleted = Vec::new();
        for &(modified_at, read_at) in times {
            let base = Base {
                envelope: &envelope,
                modified_at,
                read_at,
            };
            let (next, range) = next_envelope(Some(base), LockDoc::default(), delete);
            assert_eq!(next.generation, envelope.generation + 1);
            deleted.push(range);
            envelope = next;
        }
        (envelope, deleted)
    }

    #[test]
    fn nothing_is_deleted_within_the_keep_time() {
        let (last, deleted) = chain(&[(0, 0), (1, 1), (2, T), (T, T + 1)], true);
        assert!(deleted.iter().all(|range| range.is_empty()), "{deleted:?}");
        assert_eq!(last.tail, 1);
    }

    #[test]
    fn generations_below_an_old_checkpoint_are_deleted_once() {
        // Generation 3 existed at T + 1 (its successor's checkpoint (3, T+1));
        // a read answered at 2T + 2 deletes 1..3.
        let (last, deleted) = chain(&[(0, 0), (0, 0), (T + 1, T + 1), (T + 1, 2 * T + 2)], true);
        assert_eq!(deleted.last(), Some(&(1..3)));
        assert_eq!(last.tail, 3);
        let base = Base {
            envelope: &last,
            modified_at: 2 * T + 2,
            read_at: 2 * T + 3,
        };
        let (_, again) = next_envelope(Some(base), LockDoc::default(), true);
        assert!(again.is_empty(), "each generation is deleted by one writer");
    }

    #[test]
    fn a_generation_is_deleted_only_once_its_successor_existed_long_enough_before_the_read() {
        // Generation g + 1 existed at `modified[g + 1]`; g may go only at a
        // read answered more than T after that.
        let mut modified = vec![0_i64, 0]; // index = generation
        let (mut envelope, _) = next_envelope(None, LockDoc::default(), true);
        for i in 1..400_i64 {
            let read_at = i * T / 37;
            let modified_at = modified[envelope.generation as usize];
            let base = Base {
                envelope: &envelope,
                modified_at,
                read_at,
            };
            let (next, range) = next_envelope(Some(base), LockDoc::default(), true);
            for gone in range {
                let successor_at = modified[gone as usize + 1];
                assert!(read_at - successor_at > T, "deleted {gone} too early");
            }
            modified.push(read_at);
            envelope = next;
        }
        assert!(
            envelope.tail > 300,
            "and old ones do go: tail {}",
            envelope.tail
        );
        assert!(envelope.checkpoints.len() <= MAX_CHECKPOINTS);
    }

    #[test]
    fn a_caller_clock_decides_nothing() {
        // The same service times with any caller `now`: the API has none.
        let (a, _) = chain(&[(0, 0), (T + 1, T + 1), (T + 1, 2 * T + 2)], true);
        assert_eq!(a.tail, 2);
    }

    #[test]
    fn a_failed_deletion_keeps_the_tail_for_the_next_writer() {
        let (last, _) = chain(&[(0, 0), (0, 0), (T + 1, T + 1)], true);
        let base = Base {
            envelope: &last,
            modified_at: T + 1,
            read_at: 2 * T + 2,
        };
        let (kept, range) = next_envelope(Some(base), LockDoc::default(), false);
        assert!(range.is_empty());
        assert_eq!(kept.tail, 1);
        let base = Base {
            envelope: &kept,
            modified_at: 2 * T + 2,
            read_at: 2 * T + 3,
        };
        let (_, retried) = next_envelope(Some(base), LockDoc::default(), true);
        assert_eq!(retried, 1..3);
    }

    #[test]
    fn failing_deletions_keep_the_envelope_bounded_and_fill_the_backlog() {
        // Two minutes between writes for ten hours, every deletion failing.
        let times: Vec<(i64, i64)> = (0..300).map(|i| (i * T * 2 / 5, i * T * 2 / 5)).collect();
        let (last, deleted) = chain(&times, false);
        assert!(deleted.iter().all(|range| range.is_empty()));
        assert_eq!(last.checkpoints.len(), MAX_CHECKPOINTS);
        assert!(backlog_full(&last));
        let (fresh, _) = chain(&times[..10], true);
        assert!(!backlog_full(&fresh));
    }

    #[test]
    fn a_backlog_drains_a_bounded_number_per_write() {
        let mut times = vec![(0, 0); 120];
        times.push((T / 4 + 1, T / 4 + 1));
        times.push((T / 2, 2 * T));
        let (last, deleted) = chain(&times, true);
        assert_eq!(
            deleted.last().map(|r| r.end - r.start),
            Some(MAX_DELETIONS_PER_WRITE)
        );
        assert_eq!(last.tail, 1 + MAX_DELETIONS_PER_WRITE);
    }
}
