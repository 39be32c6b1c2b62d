//! The SSM store's bookkeeping of generations, as pure logic: which old
//! generations a writer may delete, and the envelope each generation's
//! parameter holds (the lock's document plus that bookkeeping).
//!
//! Generation `g` may be deleted once its successor was written more than
//! [`KEEP_SUPERSEDED_MILLIS`] ago: a writer that read generation `g-1` as the
//! newest and so tries to create `g` must then have read a view older than
//! that, and SSM's reads are stale for seconds at most. Successor times come
//! from checkpoints, `(generation, written at)`, one every quarter of that
//! time: every generation below a checkpoint was superseded by its time.

use serde::{Deserialize, Serialize};

use crate::document::LockDoc;

/// How long a superseded generation is kept.
pub const KEEP_SUPERSEDED_MILLIS: i64 = 5 * 60 * 1000;
/// Generations one write deletes at most (five `DeleteParameters` calls); a
/// backlog drains over the next writes.
pub const MAX_DELETIONS_PER_WRITE: u64 = 50;

/// What one generation's parameter holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// This generation's number (also in its name; here for `current`).
    pub generation: u64,
    /// The oldest generation that may still exist.
    pub tail: u64,
    /// `(generation, written at)`, oldest first; a few at most.
    pub checkpoints: Vec<(u64, i64)>,
    pub lock: LockDoc,
}

/// The envelope of the generation after `previous` (`None`: the first), and
/// the generations its writer deletes once it has won: `tail..new tail`.
/// With `delete` false, nothing is deleted (a deletion failed): the tail stays.
pub fn next_envelope(
    previous: Option<&Envelope>,
    lock: LockDoc,
    now: i64,
    delete: bool,
) -> (Envelope, std::ops::Range<u64>) {
    let Some(previous) = previous else {
        let first = Envelope {
            generation: 1,
            tail: 1,
            checkpoints: vec![(1, now)],
            lock,
        };
        return (first, 1..1);
    };
    let generation = previous.generation + 1;
    let mut checkpoints = previous.checkpoints.clone();
    // Everything below the newest checkpoint older than the keep time may go.
    let deletable_below = checkpoints
        .iter()
        .rev()
        .find(|(_, at)| *at < now - KEEP_SUPERSEDED_MILLIS)
        .map_or(previous.tail, |(checkpoint, _)| *checkpoint);
    let new_tail = match delete {
        true => deletable_below
            .min(previous.tail + MAX_DELETIONS_PER_WRITE)
            .max(previous.tail),
        false => previous.tail,
    };
    checkpoints.retain(|(checkpoint, _)| *checkpoint >= new_tail);
    let stale = checkpoints
        .last()
        .is_none_or(|(_, at)| *at < now - KEEP_SUPERSEDED_MILLIS / 4);
    if stale {
        checkpoints.push((generation, now));
    }
    let next = Envelope {
        generation,
        tail: new_tail,
        checkpoints,
        lock,
    };
    (next, previous.tail..new_tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = KEEP_SUPERSEDED_MILLIS;

    fn chain(times: &[i64]) -> (Envelope, Vec<std::ops::Range<u64>>) {
        let (mut envelope, _) = next_envelope(None, LockDoc::default(), times[0], true);
        let mut deleted = Vec::new();
        for &now in &times[1..] {
            let (next, range) = next_envelope(Some(&envelope), LockDoc::default(), now, true);
            assert_eq!(next.generation, envelope.generation + 1);
            deleted.push(range);
            envelope = next;
        }
        (envelope, deleted)
    }

    #[test]
    fn nothing_is_deleted_within_the_keep_time() {
        let (last, deleted) = chain(&[0, 1, 2, T - 1, T]);
        assert!(deleted.iter().all(|range| range.is_empty()), "{deleted:?}");
        assert_eq!(last.tail, 1);
    }

    #[test]
    fn generations_superseded_before_an_old_checkpoint_are_deleted_once() {
        // 1..=3 at 0; 4 at T+1 (a checkpoint); 5 at 2T+2: 1..=3 were
        // superseded by generation 4's time, more than T ago.
        let (last, deleted) = chain(&[0, 0, 0, T + 1, 2 * T + 2]);
        assert_eq!(deleted.last(), Some(&(1..4)));
        assert_eq!(last.tail, 4);
        let (_, again) = next_envelope(Some(&last), LockDoc::default(), 2 * T + 3, true);
        assert!(again.is_empty(), "each generation is deleted by one writer");
    }

    #[test]
    fn a_generation_is_never_deleted_before_its_successor_is_old_enough() {
        // Whatever the timing, the range deleted at `now` only holds
        // generations whose successor was written at or before now - T.
        let times: Vec<i64> = (0..400).map(|i| i * T / 37).collect();
        let (mut envelope, _) = next_envelope(None, LockDoc::default(), times[0], true);
        let mut written = vec![(1, times[0])];
        for &now in &times[1..] {
            let (next, range) = next_envelope(Some(&envelope), LockDoc::default(), now, true);
            for gone in range {
                let successor_at = written[gone as usize].1; // generation gone+1
                assert!(successor_at < now - T, "deleted {gone} too early");
            }
            written.push((next.generation, now));
            envelope = next;
        }
        assert!(
            envelope.tail > 300,
            "and old ones do go: tail {}",
            envelope.tail
        );
        assert!(
            envelope.checkpoints.len() <= 8,
            "{:?}",
            envelope.checkpoints
        );
    }

    #[test]
    fn a_failed_deletion_keeps_the_tail_for_the_next_writer() {
        let (last, _) = chain(&[0, 0, 0, T + 1]);
        let (kept, range) = next_envelope(Some(&last), LockDoc::default(), 2 * T + 2, false);
        assert!(range.is_empty());
        assert_eq!(kept.tail, 1);
        let (_, retried) = next_envelope(Some(&kept), LockDoc::default(), 2 * T + 3, true);
        assert_eq!(retried, 1..4);
    }

    #[test]
    fn a_backlog_drains_a_bounded_number_per_write() {
        let mut times = vec![0; 120];
        times.push(T / 4 + 1);
        times.push(2 * T);
        let (last, deleted) = chain(&times);
        assert_eq!(
            deleted.last().map(|r| r.end - r.start),
            Some(MAX_DELETIONS_PER_WRITE)
        );
        assert_eq!(last.tail, 1 + MAX_DELETIONS_PER_WRITE);
    }
}
