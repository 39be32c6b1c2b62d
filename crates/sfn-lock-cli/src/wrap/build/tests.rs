//! build.rs's tests: the output is the reviewed file but for the wrap's
//! edits, in the files' and the user's own layout.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sfn_lock::Limit;

use super::super::shape::shape;
use super::super::template::{
    LockName, Mode, Settings, Template, RELEASE_STATE, WAIT_STATE, WORKLOAD_STATE,
};
use super::super::timing::{Bounds, Timing};
use super::{build, UserParts};

/// The placeholders that stay in the output, for the user's template.
const KEPT_PLACEHOLDERS: [&str; 2] = ["AcquireLockFunctionArn", "ReleaseLockFunctionArn"];

fn settings(mode: Mode) -> Settings {
    Settings {
        mode,
        lock_name: LockName::Fixed(
            sfn_lock::LockName::new("nightly \"etl\"").expect("a valid name"),
        ),
        limit: Limit::new("limit", 3).expect("a valid limit"),
        max_wait_seconds: 120,
        workload_max_run_seconds: 900,
        lease_margin_seconds: 300,
        pass_lock_to_workload: false,
        partition: "aws".into(),
        flavour: Default::default(),
    }
}

const USER: &str = r#"{
  "Comment": "Mine",
  "Version": "1.0",
  "TimeoutSeconds": 600,
  "StartAt": "Zeta",
  "States": {
    "Zeta": {"Type": "Pass", "Next": "Alpha"},
    "Alpha": {
      "Type": "Task",
      "Resource": "${MyFunctionArn}",
      "Retry": [{"ErrorEquals": ["Boom"], "MaxAttempts": 2}],
      "End": true
    }
  }
}"#;

/// The timing of USER's 600 s with `settings`, as the pipeline computes it.
fn timing(settings: &Settings) -> Timing {
    let reviewed = Template::load(settings, 1).expect("template loads");
    let bounds = Bounds::new(settings, &reviewed.value).expect("bounds");
    bounds.timing(600).expect("a timing")
}

fn wrapped(settings: &Settings) -> (String, Value) {
    let user: Value = serde_json::from_str(USER).expect("sample parses");
    let timing = timing(settings);
    let template = Template::load(settings, timing.lease).expect("template loads");
    let shape = shape(user["States"].as_object().expect("States")).expect("a shape");
    let parts = UserParts {
        text: USER,
        value: &user,
        timing: &timing,
        shape: &shape,
        comment: Some("Mine"),
        version: Some("1.0"),
    };
    let text = build(&template, settings, &parts).expect("wraps");
    let value = serde_json::from_str(&text).expect("output parses");
    (text, value)
}

fn placeholders(text: &str) -> BTreeSet<&str> {
    text.match_indices("${")
        .filter_map(|(at, _)| text[at + 2..].split_once('}').map(|(name, _)| name))
        .collect()
}

#[test]
fn the_lock_states_are_the_files_own_but_the_wraps_edits() {
    for mode in [Mode::Wait, Mode::Skip] {
        let settings = settings(mode);
        let (_, out) = wrapped(&settings);
        let timing = timing(&settings);
        let template = Template::load(&settings, timing.lease).expect("template loads");
        let original = &template.value["States"];
        let states = out["States"].as_object().expect("States");
        // The marker's router is left out, nothing else.
        let left_out = template.left_out();
        assert_eq!(
            left_out,
            ["Check Whether Workload Failed", "Take Workload Error"],
            "{mode:?}"
        );
        let files = original.as_object().map_or(0, |states| states.len());
        assert_eq!(states.len(), files - left_out.len(), "{mode:?}");
        for name in &left_out {
            assert!(!states.contains_key(name), "{mode:?}: {name} left out");
        }
        for (name, state) in states {
            let mut state = state.clone();
            if let Some(payload) = state
                .pointer_mut("/Parameters/Payload")
                .and_then(Value::as_object_mut)
            {
                if let Some(name) = payload.remove("lockName") {
                    assert_eq!(name, json!("nightly \"etl\""));
                    payload.insert("lockName".into(), json!("${LockName}"));
                }
            }
            // The wrap's own edits (checked in the tests of the CLI).
            let edited: &[&str] = match name.as_str() {
                WORKLOAD_STATE => &["Branches", "Comment", "Catch", "Next"],
                WAIT_STATE => &["Comment"],
                _ => &[],
            };
            for field in edited {
                state[*field] = original[name][*field].clone();
            }
            assert_eq!(&state, &original[name], "{mode:?}: state {name}");
        }
        assert_eq!(out["States"][WORKLOAD_STATE]["Next"], json!(RELEASE_STATE));
        assert_eq!(out["TimeoutSeconds"], json!(timing.execution_timeout));
        assert_eq!(out["Version"], json!("1.0"));
    }
}

#[test]
fn the_branch_is_the_users_states_in_their_order() {
    let (text, out) = wrapped(&settings(Mode::Wait));
    let user: Value = serde_json::from_str(USER).expect("sample parses");
    let branch = &out["States"][WORKLOAD_STATE]["Branches"];
    assert_eq!(
        branch,
        &json!([{"StartAt": "Zeta", "States": user["States"]}])
    );
    let zeta = text.find("\"Zeta\": {").expect("Zeta printed");
    let alpha = text.find("\"Alpha\": {").expect("Alpha printed");
    assert!(zeta < alpha, "the user's order kept:\n{text}");
    assert!(
        text.contains("\n            \"Zeta\": {\"Type\": \"Pass\""),
        "reindented:\n{text}"
    );
    // Top-level fields in the order a reader expects.
    let comment = text.find("\"Comment\"").expect("a Comment");
    let timeout = text.find("\"TimeoutSeconds\"").expect("a TimeoutSeconds");
    let start = text.find("\"StartAt\"").expect("a StartAt");
    assert!(comment < timeout && timeout < start, "{text}");
}

#[test]
fn only_the_function_arns_and_the_users_own_placeholders_stay() {
    for mode in [Mode::Wait, Mode::Skip] {
        let (text, _) = wrapped(&settings(mode));
        let mut expected: BTreeSet<&str> = KEPT_PLACEHOLDERS.into();
        expected.insert("MyFunctionArn");
        assert_eq!(placeholders(&text), expected, "{mode:?}");
    }
}

#[test]
fn the_lock_states_are_in_the_partition_or_keep_its_placeholder() {
    for (partition, resource) in [
        ("aws-cn", "arn:aws-cn:states:::lambda:invoke"),
        ("${Partition}", "arn:${Partition}:states:::lambda:invoke"),
    ] {
        let settings = Settings {
            partition: partition.into(),
            ..settings(Mode::Skip)
        };
        let (text, out) = wrapped(&settings);
        for state in ["Acquire Lock", "Release Lock", "Release Lock After Failure"] {
            assert_eq!(out["States"][state]["Resource"], json!(resource), "{state}");
        }
        let mut expected: BTreeSet<&str> = KEPT_PLACEHOLDERS.into();
        expected.insert("MyFunctionArn");
        if partition.starts_with("${") {
            expected.insert("Partition");
        }
        assert_eq!(placeholders(&text), expected, "{partition}");
    }
}

#[test]
fn prints_nothing_when_the_text_and_the_values_disagree() {
    // Cannot happen with one document as both; stands for any splice bug.
    let settings = settings(Mode::Wait);
    let timing = timing(&settings);
    let template = Template::load(&settings, timing.lease).expect("template loads");
    let other: Value = serde_json::from_str(&USER.replace("Zeta", "Eta")).expect("parses");
    let shape = shape(other["States"].as_object().expect("States")).expect("a shape");
    let parts = UserParts {
        text: USER,
        value: &other,
        timing: &timing,
        shape: &shape,
        comment: None,
        version: None,
    };
    let error = build(&template, &settings, &parts).expect_err("refused");
    assert!(
        error.contains("does not say what the wrap means"),
        "{error}"
    );
}

#[test]
fn fills_in_the_settings() {
    let mut settings = settings(Mode::Wait);
    settings.lock_name = LockName::InputPath("$.customer.id".into());
    settings.pass_lock_to_workload = true;
    let (_, out) = wrapped(&settings);
    let acquire = &out["States"]["Acquire Lock"];
    let payload = &acquire["Parameters"]["Payload"];
    assert_eq!(
        payload["lockName.$"],
        json!("$$.Execution.Input.customer.id")
    );
    assert_eq!(payload.get("lockName"), None);
    assert_eq!(payload["limit"], json!(3));
    assert_eq!(payload["maxWaitSeconds"], json!(120));
    // The lease is a literal, the one timing.rs computed.
    assert_eq!(payload["leaseSeconds"], json!(timing(&settings).lease));
    assert_eq!(payload.get("leaseSeconds.$"), None);
    assert_eq!(acquire["ResultPath"], json!("$.sfnLock"));
    let release = &out["States"]["Release Lock After Failure"]["Parameters"]["Payload"];
    assert_eq!(
        release["lockName.$"],
        json!("$$.Execution.Input.customer.id")
    );
    assert_eq!(out["States"][WAIT_STATE]["Seconds"], json!(900));
    let comment = out["Comment"].as_str().expect("Comment");
    assert!(
        comment.starts_with("Mine [sfn-lock wrap --mode wait:"),
        "{comment}"
    );
    assert!(comment.contains("named by $.customer.id"), "{comment}");
}
