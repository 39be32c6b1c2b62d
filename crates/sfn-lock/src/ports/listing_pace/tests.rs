//! The pacer's arithmetic on an injected clock (no test waits on a real one).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// A listing that sends each batch as soon as the pacer lets it: the send
/// time of every request, from `start`.
fn greedy(pacer: &mut Pacer, start: Instant, batches: &[u32]) -> Vec<Instant> {
    let mut now = start;
    let mut sent = Vec::new();
    for &batch in batches {
        now += pacer.reserve(now, batch);
        sent.extend(std::iter::repeat_n(now, batch as usize));
    }
    sent
}

/// A listing's shape: pages of names, then reads of two requests each.
fn listing(pages: usize, reads: usize) -> Vec<u32> {
    let mut batches = vec![1; pages];
    batches.extend(std::iter::repeat_n(LOCK_READ_REQUESTS, reads));
    batches
}

#[test]
fn a_listing_sends_at_most_six_requests_in_any_second_and_five_on_average() {
    let start = Instant::now();
    let mut pacer = Pacer::new(INTERVAL);
    let sent = greedy(&mut pacer, start, &listing(30, 100));
    assert_eq!(sent.len(), 230);
    assert_eq!(sent[0], start, "the first request waits for nothing");
    for &from in &sent {
        let within = sent
            .iter()
            .filter(|&&at| at >= from && at < from + Duration::from_secs(1))
            .count();
        assert!(within <= 6, "{within} requests in the second from {from:?}");
    }
    // 230 requests: the last read's pair goes 228 intervals after the first.
    let last = *sent.last().unwrap();
    assert_eq!(last - start, INTERVAL * 228);
    let per_second = 228.0 / (last - start).as_secs_f64();
    assert!(
        per_second <= f64::from(LISTING_REQUESTS_PER_SECOND),
        "{per_second}"
    );
}

#[test]
fn idle_time_earns_no_burst() {
    let start = Instant::now();
    let mut pacer = Pacer::new(INTERVAL);
    assert_eq!(pacer.reserve(start, 1), Duration::ZERO);
    let later = start + Duration::from_secs(60);
    let sent = greedy(&mut pacer, later, &[1, 1, 1, 1, 1, 1]);
    assert_eq!(sent[0], later);
    for pair in sent.windows(2) {
        assert_eq!(pair[1] - pair[0], INTERVAL, "{sent:?}");
    }
}

#[test]
fn a_request_asked_for_late_waits_only_for_what_is_left_of_its_turn() {
    let start = Instant::now();
    let mut pacer = Pacer::new(INTERVAL);
    assert_eq!(pacer.reserve(start, LOCK_READ_REQUESTS), Duration::ZERO);
    let asked = start + Duration::from_millis(100);
    assert_eq!(
        pacer.reserve(asked, 1),
        INTERVAL * LOCK_READ_REQUESTS - Duration::from_millis(100)
    );
}

#[test]
fn the_estimate_counts_the_pages_and_the_reads_at_the_rate() {
    assert_eq!(LISTING_REQUESTS_PER_SECOND, 5);
    // 100 locks: 300 parameters in 30 pages, 200 read requests.
    assert_eq!(listing_estimate(100), (230, Duration::from_secs(46)));
    assert_eq!(
        listing_estimate(10_000),
        (23_000, Duration::from_secs(4_600))
    );
    assert_eq!(listing_estimate(1), (3, Duration::from_millis(600)));
}

#[tokio::test]
async fn a_watched_listing_counts_every_paced_request_and_reports_each_step() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let report = {
        let seen = seen.clone();
        move |progress: &ListingProgress| seen.lock().unwrap().push(*progress)
    };
    let (answer, done) = watched(report, async {
        assert!(is_paced());
        turn(1).await;
        record(|p| {
            p.pages += 1;
            p.locks_found = 3;
        });
        turn(LOCK_READ_REQUESTS).await;
        record(|p| p.locks_read += 1);
        "listed"
    })
    .await;
    assert_eq!(answer, "listed");
    let after_read = ListingProgress {
        requests: 3,
        pages: 1,
        locks_found: 3,
        locks_read: 1,
    };
    assert_eq!(done, after_read);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].requests, 1);
    assert_eq!(seen[1], after_read);
}

#[tokio::test]
async fn listings_are_paced_except_the_ones_run_unpaced() {
    assert!(is_paced(), "outside any scope: paced");
    assert!(!unpaced(async { is_paced() }).await);
    let (inner, _) = watched(|_| {}, unpaced(async { is_paced() })).await;
    assert!(!inner, "the innermost scope decides");
}
