//! Tests of `record.rs`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::*;
use crate::metrics::names::{LOCK_NAME_DIMENSION, METRICS};
use crate::vocab::answer::QueuedResponse;

fn settings(pairs: &[(&str, &str)]) -> Result<MetricsSettings, LockError> {
    MetricsSettings::from_lookup(|name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    })
}

/// The lines `emit` writes through metrics with `settings`, parsed.
fn emitted(settings: MetricsSettings, emit: impl FnOnce(&Metrics)) -> Vec<Value> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    emit(&Metrics::new(settings, move |line| {
        sink.lock().unwrap().push(line.to_owned())
    }));
    let lines = lines.lock().unwrap();
    lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn settings_default_to_on_and_refuse_anything_but_on_or_off() {
    assert_eq!(settings(&[]).unwrap(), MetricsSettings::default());
    let set = settings(&[
        ("METRICS", " OFF "),
        ("METRICS_NAMESPACE", "team/locks"),
        ("METRICS_LOCK_NAME_DIMENSION", "off"),
    ])
    .unwrap();
    assert!(!set.enabled && !set.lock_name_dimension);
    assert_eq!(set.namespace, "team/locks");
    for (name, bad) in [
        ("METRICS", "yes"),
        ("METRICS_LOCK_NAME_DIMENSION", "1"),
        ("METRICS_NAMESPACE", ""),
        ("METRICS_NAMESPACE", "AWS/Lambda"),
        ("METRICS_NAMESPACE", "é"),
    ] {
        let result = settings(&[(name, bad)]);
        assert!(
            matches!(&result, Err(LockError::InvalidRequest { field, .. }) if field == name),
            "{name}={bad}: {result:?}"
        );
    }
    assert!(settings(&[("METRICS_NAMESPACE", &"n".repeat(256))]).is_err());
}

#[test]
fn a_record_goes_to_the_lock_name_and_to_no_dimension_unless_switched_off() {
    let record = |metrics: &Metrics| {
        metrics.record(Some("etl"), EpochMillis(5), &[Sample::count(GRANTED)]);
        metrics.record(Some("über"), EpochMillis(5), &[Sample::count(GRANTED)]);
    };
    let on = emitted(MetricsSettings::default(), record);
    let dimensions = |line: &Value| line["_aws"]["CloudWatchMetrics"][0]["Dimensions"].clone();
    assert_eq!(dimensions(&on[0]), json!([["LockName"], []]));
    assert_eq!(
        (&on[0]["LockName"], &on[0]["Granted"]),
        (&json!("etl"), &json!(1))
    );
    // CloudWatch takes ASCII dimension values only.
    assert_eq!(dimensions(&on[1]), json!([[]]));
    let off = MetricsSettings {
        lock_name_dimension: false,
        ..MetricsSettings::default()
    };
    let off = emitted(off, record);
    assert_eq!(dimensions(&off[0]), json!([[]]));
    assert_eq!(off[0]["LockName"], "etl", "still there for Logs Insights");
    let disabled = MetricsSettings {
        enabled: false,
        ..MetricsSettings::default()
    };
    assert!(emitted(disabled, record).is_empty());
}

fn samples(event: Value, answer: Result<AcquireAnswer, LockError>) -> Vec<(&'static str, u64)> {
    let request = AcquireRequest::from_event(&event).unwrap();
    let now = EpochMillis::parse_rfc3339("2026-11-30T10:00:02.5Z").unwrap();
    acquire_samples(&request, &answer, now)
        .into_iter()
        .map(|sample| (sample.name, sample.value))
        .collect()
}

#[test]
fn each_acquire_answer_reports_its_own_metrics() {
    let plain = json!({"lockName": "etl", "owner": "me"});
    let waiting = json!({"lockName": "etl", "owner": "me",
                         "waitStartedAt": "2026-11-30T10:00:00Z", "maxWaitSeconds": 60});
    let queued = Ok(AcquireAnswer::Queued(QueuedResponse {
        lock_name: "etl".into(),
        owner: "me".into(),
        outcome: Outcome::Queued,
        position: 3,
    }));
    assert_eq!(
        samples(plain.clone(), queued),
        [(QUEUED, 1), (QUEUE_LENGTH, 3)]
    );
    let held = LockError::Unavailable {
        lock_name: "etl".into(),
        holder: "them".into(),
        expires_at: "soon".into(),
        limit: 1,
        live_holders: vec![],
    };
    assert_eq!(
        samples(plain.clone(), Err(held.clone())),
        [(CONTENDED, 1), (SKIPPED_RUNS, 1)],
        "no wait bound: skip-if-running's refusal"
    );
    assert_eq!(samples(waiting.clone(), Err(held)), [(CONTENDED, 1)]);
    let gave_up = LockError::WaitTimeout {
        lock_name: "etl".into(),
        holder: "them".into(),
        expires_at: "soon".into(),
        limit: 1,
        live_holders: vec![],
        max_wait_seconds: 60,
    };
    assert_eq!(
        samples(waiting.clone(), Err(gave_up)),
        [(CONTENDED, 1), (WAIT_TIMEOUTS, 1)]
    );
    let store = LockError::StoreUnavailableWhileWaiting {
        lock_name: "etl".into(),
        detail: "timeout".into(),
    };
    assert_eq!(samples(waiting, Err(store)), [(ACQUIRE_ERRORS, 1)]);
}

#[test]
fn the_reconciler_counts_each_release_and_each_wake_per_lock() {
    let report = ReconcileReport {
        released: vec![crate::sweep::cleanup::ReleasedLock {
            lock_name: "etl".into(),
            owner: "arn:exec:ended".into(),
        }],
        queues_woken: vec!["nightly".into()],
        ..ReconcileReport::default()
    };
    let lines = emitted(MetricsSettings::default(), |metrics| {
        metrics.reconciled(&report, EpochMillis(5))
    });
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        (&lines[0]["LockName"], &lines[0][RECONCILE_RELEASES]),
        (&json!("etl"), &json!(1))
    );
    assert_eq!(
        (&lines[1]["LockName"], &lines[1][RECONCILE_WAKES]),
        (&json!("nightly"), &json!(1))
    );
    let quiet = emitted(MetricsSettings::default(), |metrics| {
        metrics.reconciled(&ReconcileReport::default(), EpochMillis(5))
    });
    assert!(quiet.is_empty(), "a run that caught nothing emits nothing");
}

#[test]
fn every_metric_name_is_listed_once() {
    let mut names: Vec<&str> = METRICS.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), METRICS.len());
    assert!(!names.contains(&LOCK_NAME_DIMENSION));
}
