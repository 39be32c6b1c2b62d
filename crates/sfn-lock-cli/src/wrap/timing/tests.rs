//! timing.rs's tests: the bounds read from the files and the sums. The
//! worst-case timeline is checked against the CLI's output in
//! tests/wrap/timing.rs.

use serde_json::json;

use super::super::fixtures::settings;
use super::super::template::Template;
use super::*;

fn bounds_of(settings: &Settings) -> Bounds {
    let template = Template::load(settings, 1).expect("template loads");
    Bounds::new(settings, &template.value).expect("bounds")
}

#[test]
fn the_bounds_come_from_the_files_retriers() {
    let wait = bounds_of(&settings());
    // Past the bound: the attempt in flight, a 10 s backoff, the next
    // attempt, six store-error retries (1+2+4+8+16+20 s) and theirs.
    assert_eq!(wait.acquire, 10 + 51 + 8 * ACQUIRE_INVOCATION_SECONDS);
    // A release: its attempt and six retries.
    assert_eq!(wait.release, 51 + 7 * RELEASE_INVOCATION_SECONDS);
    assert_eq!((wait.wait, wait.held, wait.margin), (3600, 900, 300));
    let skip = bounds_of(&Settings {
        mode: Mode::Skip,
        ..settings()
    });
    assert_eq!(skip.acquire, 51 + 7 * ACQUIRE_INVOCATION_SECONDS);
    assert_eq!((skip.wait, skip.release), (0, wait.release));
    // A retrier changed in the file changes the bound.
    let mut template = Template::load(&settings(), 1)
        .expect("template loads")
        .value;
    template["States"]["Acquire Lock"]["Retry"][1]["MaxAttempts"] = json!(7);
    let longer = Bounds::new(&settings(), &template).expect("bounds");
    assert_eq!(
        longer.acquire,
        wait.acquire + 20 + ACQUIRE_INVOCATION_SECONDS
    );
    template["States"]["Acquire Lock"]["Retry"][1]["MaxAttempts"] = json!(1000);
    assert!(Bounds::new(&settings(), &template).is_err());
}

#[test]
fn the_timeout_and_the_lease_add_up_within_the_limits() {
    let bounds = bounds_of(&settings());
    let timing = bounds.timing(5400).expect("a timing");
    let (a, r) = (bounds.acquire, bounds.release);
    assert_eq!(timing.execution_timeout, 5400 + 3600 + a + 900 + r);
    assert_eq!(timing.lease, timing.execution_timeout + 900 + 300);
    let longest = u64::from(MAX_LEASE_SECONDS) - (timing.lease - 5400);
    assert_eq!(
        bounds.timing(longest).map(|t| t.lease),
        Ok(u64::from(MAX_LEASE_SECONDS))
    );
    let over = bounds
        .timing(longest + 1)
        .expect_err("over the lease limit");
    assert!(
        over.contains("over the 31536000 acquire-lock accepts"),
        "{over}"
    );
    let asl = bounds
        .timing(MAX_TIMEOUT_SECONDS)
        .expect_err("over ASL's limit");
    assert!(asl.contains("over the 99999999 ASL accepts"), "{asl}");
    assert!(bounds.timing(u64::MAX).is_err(), "no overflow");
}
