//! The metrics the lock reports as CloudWatch Embedded Metric Format lines:
//! every line checked against the specification's required fields
//! ([`valid_emf`]), and the values a granted, contended, released and swept
//! lock report. The lock and the sweep run here against the local stack with
//! their lines captured; the last test reads what the real binaries wrote.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::lossy_proxy::store_via;
use common::sfn::{hold, queue, start, stop, sweeper, LOCKED};
use common::{client, closing_endpoint, invoke, table_name, unique};
use serde_json::{json, Map, Value};
use sfn_lock::metrics::{Metrics, MetricsSettings};
use sfn_lock::{DynamoStore, EpochMillis, LeaseSeconds, LockError, Locker};

/// CloudWatch's metric units (MetricDatum), as the EMF schema lists them.
const UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// `line` parsed, after checking it is an EMF document CloudWatch accepts.
fn valid_emf(line: &str) -> Value {
    let root: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let root = root
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {line}"));
    let aws = root["_aws"]
        .as_object()
        .unwrap_or_else(|| panic!("no _aws object: {line}"));
    let timestamp = aws.get("Timestamp").and_then(Value::as_i64);
    assert!(
        timestamp.is_some_and(|ms| ms > 1_000_000_000_000),
        "Timestamp in ms: {line}"
    );
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .expect("CloudWatchMetrics array");
    assert!(!directives.is_empty(), "no MetricDirective: {line}");
    for directive in directives {
        let directive = directive.as_object().expect("a MetricDirective object");
        only_members(directive, &["Namespace", "Dimensions", "Metrics"]);
        let namespace = directive["Namespace"].as_str().expect("Namespace string");
        assert!(
            (1..=255).contains(&namespace.len()),
            "Namespace length: {line}"
        );
        let sets = directive["Dimensions"]
            .as_array()
            .expect("Dimensions array");
        assert!(
            !sets.is_empty(),
            "Dimensions holds at least one set: {line}"
        );
        for set in sets {
            let set = set.as_array().expect("a DimensionSet array");
            assert!(set.len() <= 30, "more than 30 dimensions: {line}");
            for name in set {
                let name = name.as_str().expect("a dimension name string");
                let value = root.get(name).and_then(Value::as_str);
                assert!(
                    value.is_some_and(|v| v.is_ascii() && !v.trim().is_empty() && v.len() <= 1024),
                    "dimension {name} needs a root member with an ASCII string value: {line}"
                );
            }
        }
        let metrics = directive["Metrics"].as_array().expect("Metrics array");
        assert!(
            (1..=100).contains(&metrics.len()),
            "1 to 100 metrics: {line}"
        );
        for metric in metrics {
            let metric = metric.as_object().expect("a MetricDefinition object");
            only_members(metric, &["Name", "Unit", "StorageResolution"]);
            let name = metric["Name"].as_str().expect("Name string");
            assert!((1..=255).contains(&name.len()), "Name length: {line}");
            let is_number = |v: &Value| v.is_number();
            let value = root.get(name);
            assert!(
                value.is_some_and(|v| is_number(v)
                    || v.as_array()
                        .is_some_and(|a| a.len() <= 100 && a.iter().all(is_number))),
                "metric {name} needs a root member with a number: {line}"
            );
            if let Some(unit) = metric.get("Unit") {
                assert!(
                    UNITS.contains(&unit.as_str().unwrap_or("")),
                    "unit {unit}: {line}"
                );
            }
        }
    }
    Value::Object(root.clone())
}

fn only_members(object: &Map<String, Value>, allowed: &[&str]) {
    for key in object.keys() {
        assert!(allowed.contains(&key.as_str()), "unexpected member {key}");
    }
}

/// Metrics whose lines the test reads back, each checked by [`valid_emf`].
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<String>>>);

impl Captured {
    fn metrics(&self) -> Metrics {
        let lines = Arc::clone(&self.0);
        Metrics::new(MetricsSettings::default(), move |line| {
            lines.lock().unwrap().push(line.to_owned())
        })
    }

    /// The lines since the last call.
    fn take(&self) -> Vec<Value> {
        let lines = std::mem::take(&mut *self.0.lock().unwrap());
        lines.iter().map(|line| valid_emf(line)).collect()
    }

    /// The one line since the last call, with `lock` as its LockName dimension.
    fn one_for(&self, lock: &str) -> Value {
        let lines = self.take();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        let line = lines[0].clone();
        assert_eq!(line["LockName"], lock);
        let dimensions = &line["_aws"]["CloudWatchMetrics"][0]["Dimensions"];
        assert_eq!(dimensions, &json!([["LockName"], []]));
        line
    }
}

/// The values of the metrics a line declares, by name.
fn values(line: &Value) -> Map<String, Value> {
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .expect("Metrics")
        .iter()
        .map(|metric| {
            let name = metric["Name"].as_str().expect("Name").to_owned();
            (name.clone(), line[&name].clone())
        })
        .collect()
}

async fn locker(captured: &Captured) -> Locker<DynamoStore> {
    let store = DynamoStore::new(client().await, table_name());
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();
    Locker::new(store, lease).with_metrics(captured.metrics())
}

#[tokio::test]
async fn a_grant_reports_its_wait_and_a_renewal_is_counted_apart() {
    let (captured, lock) = (Captured::default(), unique("metrics-grant"));
    let locker = locker(&captured).await;
    let now = EpochMillis::now();
    let event = json!({"lockName": lock, "owner": "arn:a", "maxWaitSeconds": 60,
                       "waitStartedAt": EpochMillis(now.0 - 1500).to_rfc3339()});
    locker.acquire(&event, now).await.unwrap();
    let granted = captured.one_for(&lock);
    assert_eq!(
        values(&granted),
        *json!({"Granted": 1, "WaitTime": 1500}).as_object().unwrap()
    );
    assert_eq!(granted["_aws"]["Timestamp"], now.0);

    locker.acquire(&event, now).await.unwrap();
    assert_eq!(
        values(&captured.one_for(&lock)),
        *json!({"Renewed": 1}).as_object().unwrap()
    );
}

#[tokio::test]
async fn contention_is_counted_and_a_refusal_without_a_wait_is_a_skipped_run() {
    let (captured, lock) = (Captured::default(), unique("metrics-contended"));
    let locker = locker(&captured).await;
    let now = EpochMillis::now();
    locker
        .acquire(&json!({"lockName": lock, "owner": "arn:holder"}), now)
        .await
        .unwrap();
    captured.take();

    let skipping = json!({"lockName": lock, "owner": "arn:scheduled"});
    assert!(matches!(
        locker.acquire(&skipping, now).await,
        Err(LockError::Unavailable { .. })
    ));
    let skipped = values(&captured.one_for(&lock));
    assert_eq!(
        skipped,
        *json!({"Contended": 1, "SkippedRuns": 1})
            .as_object()
            .unwrap()
    );

    let waiting = |since: EpochMillis| {
        json!({"lockName": lock, "owner": "arn:waiter", "maxWaitSeconds": 60,
               "waitStartedAt": since.to_rfc3339()})
    };
    assert!(locker.acquire(&waiting(now), now).await.is_err());
    assert_eq!(
        values(&captured.one_for(&lock)),
        *json!({"Contended": 1}).as_object().unwrap()
    );

    let long_ago = EpochMillis(now.0 - 61_000);
    assert!(matches!(
        locker.acquire(&waiting(long_ago), now).await,
        Err(LockError::WaitTimeout { .. })
    ));
    let gave_up = values(&captured.one_for(&lock));
    assert_eq!(
        gave_up,
        *json!({"Contended": 1, "WaitTimeouts": 1})
            .as_object()
            .unwrap()
    );
}

#[tokio::test]
async fn a_release_reports_its_hold_time_and_an_overlap_is_counted() {
    let (captured, lock) = (Captured::default(), unique("metrics-release"));
    let locker = locker(&captured).await;
    let now = EpochMillis::now();
    let answer = locker
        .acquire(&json!({"lockName": lock, "owner": "arn:a"}), now)
        .await
        .unwrap();
    captured.take();

    // A stranger's release finds the lock held by another: an overlap.
    let stranger = json!({"lockName": lock, "owner": "arn:b"});
    assert_eq!(
        locker.release(&stranger, now).await.unwrap().outcome,
        "held_by_other"
    );
    assert_eq!(
        values(&captured.one_for(&lock)),
        *json!({"HeldByOther": 1}).as_object().unwrap()
    );

    // The holder passes acquire's answer on, as release-lock accepts it.
    let event = serde_json::to_value(&answer).unwrap();
    let released = locker
        .release(&event, EpochMillis(now.0 + 2500))
        .await
        .unwrap();
    assert_eq!(released.outcome, "released");
    let line = values(&captured.one_for(&lock));
    assert_eq!(
        line,
        *json!({"Released": 1, "HoldTime": 2500})
            .as_object()
            .unwrap()
    );

    assert_eq!(
        locker.release(&event, now).await.unwrap().outcome,
        "not_held"
    );
    assert!(captured.take().is_empty(), "not_held reports nothing");
}

#[tokio::test]
async fn a_waiter_that_gave_up_is_withdrawn_and_counts_no_overlap() {
    let (captured, lock) = (Captured::default(), unique("metrics-withdrawn"));
    let locker = locker(&captured).await;
    let now = EpochMillis::now();
    locker
        .acquire(&json!({"lockName": lock, "owner": "arn:a"}), now)
        .await
        .unwrap();
    captured.take();
    // The queued workflow's wait ran out: it never held the lock, so a lock
    // held by someone else is no lost lease (no HeldByOther alarm).
    let gave_up = json!({"lockName": lock, "owner": "arn:b", "withdraw": true});
    let answer = locker.release(&gave_up, now).await.unwrap();
    assert_eq!(answer.outcome, "withdrawn");
    assert!(!answer.released);
    assert!(captured.take().is_empty(), "withdrawn reports nothing");
}

#[tokio::test]
async fn acquire_errors_other_than_contention_are_counted() {
    let captured = Captured::default();
    let locker = locker(&captured).await;
    let now = EpochMillis::now();
    assert!(locker
        .acquire(&json!({"owner": "arn:a"}), now)
        .await
        .is_err());
    let lines = captured.take();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(
        values(&lines[0]),
        *json!({"AcquireErrors": 1}).as_object().unwrap()
    );
    assert_eq!(
        lines[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([[]])
    );

    // A store that cannot be reached, cut by the invocation's budget.
    let lease = LeaseSeconds::new("leaseSeconds", 60).unwrap();
    let unreachable = Locker::new(store_via(&closing_endpoint().await).await, lease)
        .with_metrics(captured.metrics());
    let lock = unique("metrics-unreachable");
    let event = json!({"lockName": lock, "owner": "arn:a"});
    let answer = unreachable
        .acquire_within(&event, now, Some(Duration::from_millis(300)))
        .await;
    assert!(
        matches!(answer, Err(LockError::StoreUnavailable { .. })),
        "{answer:?}"
    );
    assert_eq!(
        values(&captured.one_for(&lock)),
        *json!({"AcquireErrors": 1}).as_object().unwrap()
    );
}

#[tokio::test]
async fn a_lock_the_sweep_frees_is_counted() {
    const GRACE: u32 = 60;
    let (captured, lock) = (Captured::default(), unique("metrics-swept"));
    let sweeper = sweeper(GRACE, &queue().await).await;
    let ended = start(LOCKED, &unique("metrics-aborted")).await;
    hold(&sweeper.store, &lock, &ended).await;
    let stopped_at = stop(&ended).await;
    let event = common::sqs_batch(&[common::status_change(&ended, "ABORTED")]);

    let now = stopped_at.plus_seconds(GRACE);
    let report = sweeper.sweep(&event, now).await.unwrap();
    assert_eq!(report.released.len(), 1, "{report:?}");
    // What release-execution-locks does with its report (lambda.rs, handle_sweep).
    captured.metrics().swept(&report, now);
    assert_eq!(
        values(&captured.one_for(&lock)),
        *json!({"SweepReleases": 1}).as_object().unwrap()
    );
}

#[test]
fn the_functions_write_their_metrics_to_their_log() {
    let lock = unique("metrics-binary");
    let granted = invoke(
        "acquire-lock",
        json!({"lockName": lock, "owner": "arn:x"}).to_string(),
    );
    invoke("release-lock", granted.ok().to_string()).ok();
    let path = common::required_env("SFN_LOCK_LAMBDA_LOG");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter(|line| line.contains("\"_aws\"") && line.contains(&lock))
            .map(valid_emf)
            .collect();
        if lines.len() >= 2 || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let names: Vec<Map<String, Value>> = lines.iter().map(values).collect();
    assert_eq!(names.len(), 2, "{lines:#?}");
    assert_eq!(names[0]["Granted"], 1);
    assert_eq!(names[1]["Released"], 1);
    assert!(names[1]["HoldTime"].is_u64());
    assert_eq!(
        lines[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        "sfn-lock"
    );
}
