//! The facts the template checks (tests/template/*.py) need from this crate,
//! built from the real constants and functions and compared with the
//! committed `contract/code-facts.json`, so that no Python reads Rust.
//! `UPDATE_CONTRACT=1 cargo test -p sfn-lock --lib contract_facts` rewrites
//! this test's sections; its `operations` section is the integration test
//! `tests/suite/operations/`'s (what each function calls, recorded at the wire).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use aws_config::BehaviorVersion;
use serde_json::{json, Map, Value};

use crate::aws::config::{retry_config, timeout_config, waker_client};
use crate::aws::waker::{WAKE_ATTEMPTS, WAKE_PAUSE};
use crate::lambda::{Config, CLEANUP_QUEUE_URL};
use crate::metrics::{MetricsSettings, LOCK_NAME_DIMENSION, METRICS};
use crate::store::dynamodb::{MAX_ACQUIRE_ROUNDS, MAX_HAND_OFFS, OWNER_INDEX};
use crate::sweep::policy::{SweepPolicy, LATE_ACQUIRE_SECONDS};
use crate::vocab::deadline::ANSWER_MARGIN;
use crate::vocab::model::MAX_LEASE_SECONDS;

/// The sections this test owns; `operations` belongs to the integration test.
const SECTIONS: &[&str] = &["about", "environment", "limits", "metrics", "sdk"];

pub(crate) fn contract_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../contract/code-facts.json")
}

fn seconds(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |duration| json!(duration.as_secs_f64()))
}

/// Every variable `read` asks for, given these sample values (a reader that
/// stops at a missing required one would hide the rest).
fn names_read(read: impl Fn(&dyn Fn(&str) -> Option<String>)) -> BTreeSet<String> {
    let samples: BTreeMap<&str, &str> = BTreeMap::from([
        ("LOCK_STORE_URL", "dynamodb://locks"),
        ("LOCK_TABLE_NAME", "locks"),
        (
            "SWEPT_STATE_MACHINE_ARNS",
            "arn:aws:states:us-east-1:123456789012:stateMachine:locked",
        ),
    ]);
    let seen = RefCell::new(BTreeSet::new());
    read(&|name: &str| {
        seen.borrow_mut().insert(name.to_owned());
        samples.get(name).map(|value| (*value).to_owned())
    });
    seen.into_inner()
}

fn environment() -> Value {
    let lock_function = names_read(|lookup| {
        Config::from_lookup(lookup).expect("the samples configure a lock function");
        MetricsSettings::from_lookup(lookup).expect("the samples configure metrics");
    });
    let mut sweep = names_read(|lookup| {
        SweepPolicy::from_lookup(lookup).expect("the samples configure the sweep");
    });
    sweep.extend(lock_function.iter().cloned());
    // Read beside the policy in lambda::sweeper_from_env, by this name.
    sweep.insert(CLEANUP_QUEUE_URL.to_owned());
    json!({
        "acquire-lock": lock_function,
        "release-lock": lock_function,
        "release-execution-locks": sweep,
    })
}

/// CloudWatch's namespace rule as MetricsSettings applies it, probed.
fn namespace_rule() -> Value {
    let accepts = |namespace: &str| {
        MetricsSettings::from_lookup(|name| {
            (name == "METRICS_NAMESPACE").then(|| namespace.to_owned())
        })
        .is_ok()
    };
    let allowed: String = (' '..='~').filter(|c| accepts(&format!("a{c}"))).collect();
    let max_length = (1..=1024).take_while(|n| accepts(&"a".repeat(*n))).count();
    assert!(!accepts("AWS/x") && accepts("AWSx"), "AWS/ is reserved");
    json!({"allowed_characters": allowed, "max_length": max_length, "reserved_prefix": "AWS/"})
}

fn metrics() -> Value {
    let units: BTreeMap<&str, &str> = METRICS
        .iter()
        .map(|(name, unit)| (*name, unit.as_str()))
        .collect();
    json!({
        "lock_name_dimension": LOCK_NAME_DIMENSION,
        "namespace_env": "METRICS_NAMESPACE",
        "namespace_rule": namespace_rule(),
        "units": units,
    })
}

/// The SDK settings every client gets, and the waker's (retries off,
/// repeated by SfnWaker itself), read back from the built configurations.
fn sdk() -> Value {
    let (timeouts, retries) = (timeout_config(), retry_config());
    let shared = aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .timeout_config(timeouts.clone())
        .retry_config(retries.clone())
        .build();
    let waker = waker_client(&shared);
    let waker_config = waker.config();
    let waker_retries = waker_config
        .retry_config()
        .expect("the waker's retry config");
    let waker_timeouts = waker_config.timeout_config().expect("the waker's timeouts");
    json!({
        "clients": {
            "attempt_timeout_seconds": seconds(timeouts.operation_attempt_timeout()),
            "connect_timeout_seconds": seconds(timeouts.connect_timeout()),
            "initial_backoff_seconds": retries.initial_backoff().as_secs_f64(),
            "max_attempts": retries.max_attempts(),
            "max_backoff_seconds": retries.max_backoff().as_secs_f64(),
            "operation_timeout_seconds": seconds(timeouts.operation_timeout()),
            "read_timeout_seconds": seconds(timeouts.read_timeout()),
            "retry_mode": format!("{:?}", retries.mode()).to_lowercase(),
        },
        "waker": {
            "attempt_timeout_seconds": seconds(waker_timeouts.operation_attempt_timeout()),
            "max_attempts": waker_retries.max_attempts(),
            "operation_timeout_seconds": seconds(waker_timeouts.operation_timeout()),
            "pause_seconds": WAKE_PAUSE.as_secs_f64(),
            "wake_attempts": WAKE_ATTEMPTS,
        },
    })
}

fn facts() -> Map<String, Value> {
    let about = "What tests/template/*.py know of the Rust code. Written by \
        `UPDATE_CONTRACT=1 cargo test -p sfn-lock --lib contract_facts` (all but operations) and \
        `UPDATE_CONTRACT=1 scripts/local-stack.sh cargo test --test suite operations::` \
        (operations: per function and store, every request recorded at the wire); both tests \
        fail while this file says otherwise.";
    let mut found = Map::new();
    found.insert("about".into(), json!(about));
    found.insert("environment".into(), environment());
    found.insert(
        "limits".into(),
        json!({
            "answer_margin_seconds": ANSWER_MARGIN.as_secs_f64(),
            "late_acquire_seconds": LATE_ACQUIRE_SECONDS,
            "max_acquire_rounds": MAX_ACQUIRE_ROUNDS,
            "max_hand_offs": MAX_HAND_OFFS,
            "max_lease_seconds": MAX_LEASE_SECONDS,
            "owner_index": OWNER_INDEX,
        }),
    );
    found.insert("metrics".into(), metrics());
    found.insert("sdk".into(), sdk());
    found
}

#[test]
fn the_committed_contract_says_what_the_code_does() {
    let path = contract_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut committed: Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
    let mut updated = committed.clone();
    for (section, value) in facts() {
        updated.insert(section, value);
    }
    updated.retain(|section, _| SECTIONS.contains(&section.as_str()) || section == "operations");
    if std::env::var_os("UPDATE_CONTRACT").is_some() {
        let rendered = serde_json::to_string_pretty(&updated).expect("JSON") + "\n";
        std::fs::write(&path, rendered).expect("write contract/code-facts.json");
        committed = updated.clone();
    }
    let differing: Vec<String> = SECTIONS
        .iter()
        .filter(|section| committed.get(**section) != updated.get(**section))
        .map(|section| {
            format!(
                "{section}:\n  committed {}\n  the code  {}",
                committed.get(*section).unwrap_or(&Value::Null),
                updated.get(*section).unwrap_or(&Value::Null)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{} differs from the code in:\n{}\nIf the code is right, rewrite it with \
         `UPDATE_CONTRACT=1 cargo test -p sfn-lock --lib contract_facts` and review the \
         template checks it feeds (tests/template/check.sh).",
        path.display(),
        differing.join("\n")
    );
}
