//! `waitStartedAt` takes every RFC 3339 date-time and nothing else. No store
//! needed: these run without the local stack.

use proptest::prelude::*;
use serde_json::json;
use sfn_lock::{AcquireRequest, EpochMillis, LockError};

/// 2026-11-30T10:00:00Z.
const TEN_UTC: i64 = 1_796_032_800_000;

fn parsed(text: &str) -> Option<i64> {
    EpochMillis::parse_rfc3339(text).map(|instant| instant.0)
}

#[test]
fn every_rfc3339_form_is_accepted_and_offsets_are_applied() {
    let hour = 3_600_000;
    let cases = [
        ("2026-11-30T10:00:00Z", TEN_UTC),
        ("2026-11-30t10:00:00z", TEN_UTC),
        ("2026-11-30T10:00:00+00:00", TEN_UTC),
        ("2026-11-30T10:00:00-00:00", TEN_UTC),
        ("2026-11-30T12:00:00+02:00", TEN_UTC),
        ("2026-11-30T04:30:00-05:30", TEN_UTC),
        ("2026-11-30t15:45:00+05:45", TEN_UTC),
        ("2026-12-01T09:59:00+23:59", TEN_UTC),
        ("2026-11-29T10:01:00-23:59", TEN_UTC),
        ("2026-11-30T10:00:00.5Z", TEN_UTC + 500),
        ("2026-11-30T10:00:00.25+00:00", TEN_UTC + 250),
        ("2026-11-30T10:00:00.123456789Z", TEN_UTC + 123),
        ("2026-11-30T10:00:00.123456789123456z", TEN_UTC + 123),
        ("2026-11-30T12:00:00.001+02:00", TEN_UTC + 1),
        // Crossing a day and a year boundary by the offset.
        ("2027-01-01T01:00:00+02:00", 1_798_761_600_000 - hour),
        // A leap second is the instant before the next minute.
        ("2016-12-31T23:59:60Z", 1_483_228_800_000),
        ("2017-01-01T01:59:60+02:00", 1_483_228_800_000),
    ];
    for (text, millis) in cases {
        assert_eq!(parsed(text), Some(millis), "{text}");
    }
}

#[test]
fn what_is_not_rfc3339_is_refused() {
    let cases = [
        "2026-11-30 10:00:00Z",
        "2026-11-30 10:00:00",
        "2026-11-30T10:00:00",
        "2026-11-30T10:00:00+0200",
        "2026-11-30T10:00:00+02",
        "2026-11-30T10:00:00+2:00",
        "2026-11-30T10:00:00+24:00",
        "2026-11-30T10:00:00+02:60",
        "2026-11-30T10:00:00 +02:00",
        "2026-11-30T10:00:00Z+02:00",
        "2026-11-30T10:00:00+02:00Z",
        "2026-11-30T10:00:00ZZ",
        "2026-11-30T10:00:00.Z",
        "2026-11-30T10:00Z",
        "2026-11-30",
        "2026-13-30T10:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-11-30T24:00:00Z",
        "2026-11-30T10:00:61Z",
        "20261130T100000Z",
        "2026-11-30T10:00:00UTC",
        "2026-11-30T10:00:00é+0:00",
        "1796032800000",
        "",
        "Z",
        "+02:00",
    ];
    for text in cases {
        assert_eq!(parsed(text), None, "{text:?} must be refused");
    }
}

#[test]
fn a_refused_wait_start_names_waitstartedat() {
    for text in [
        "2026-11-30 10:00:00",
        "2026-11-30T10:00:00",
        "2026-11-30T12:00:00+0200",
    ] {
        let event =
            json!({"lockName": "etl", "owner": "me", "waitStartedAt": text, "maxWaitSeconds": 5});
        match AcquireRequest::from_event(&event) {
            Err(LockError::InvalidRequest { field, .. }) => {
                assert_eq!(field, "waitStartedAt", "{text}")
            }
            other => panic!("{text}: expected InvalidLockRequest, got {other:?}"),
        }
    }
    let event = json!({"lockName": "etl", "owner": "me",
                       "waitStartedAt": "2026-11-30T12:00:00+02:00", "maxWaitSeconds": 5});
    let wait = AcquireRequest::from_event(&event).unwrap().wait.unwrap();
    assert_eq!(wait.started_at, EpochMillis(TEN_UTC));
}

/// `instant` as a local time at `offset_minutes` east of UTC, e.g. `+05:30`.
fn local_text(instant: i64, offset_minutes: i64, extra_zeros: usize, lowercase: bool) -> String {
    let utc = EpochMillis(instant + offset_minutes * 60_000).to_rfc3339();
    let local = utc.strip_suffix('Z').expect("UTC text ends with Z");
    let local = match (local.contains('.'), extra_zeros) {
        (_, 0) => local.to_owned(),
        (true, zeros) => format!("{local}{}", "0".repeat(zeros)),
        (false, zeros) => format!("{local}.{}", "0".repeat(zeros)),
    };
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let (hours, minutes) = (offset_minutes.abs() / 60, offset_minutes.abs() % 60);
    let text = format!("{local}{sign}{hours:02}:{minutes:02}");
    if lowercase {
        text.replace('T', "t")
    } else {
        text
    }
}

proptest! {
    #[test]
    fn any_instant_written_at_any_offset_parses_back(
        // 1970 to 2200, millisecond precision.
        instant in 0_i64..7_258_118_400_000,
        offset_minutes in -1439_i64..=1439,
        extra_zeros in 0_usize..12,
        lowercase in any::<bool>(),
    ) {
        let text = local_text(instant, offset_minutes, extra_zeros, lowercase);
        prop_assert_eq!(parsed(&text), Some(instant), "{}", text);
    }
}
