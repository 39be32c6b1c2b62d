//! `sfn-lock wrap` as a real process: what it prints for a definition it can
//! wrap, and, for each kind of input it refuses, one line on stderr, nothing
//! on stdout and its exit status (1 for the definition, 2 for the flags).
//! No local stack needed: wrap only reads a file. The refusals
//! (wrap/refusals.rs), which errors hold the lock (wrap/held.rs), the
//! timeout and lease (wrap/timing.rs) and the user's error handling that
//! would free the lock under running work (wrap/unsafe_handling.rs), and
//! Tasks that do not wait for the work they start (wrap/unwaited.rs) have
//! modules of their own.

#[path = "wrap/arns.rs"]
mod arns;
#[path = "wrap/held.rs"]
mod held;
#[path = "wrap/lock_argument.rs"]
mod lock_argument;
#[path = "wrap/refusals.rs"]
mod refusals;
#[path = "wrap/timing.rs"]
mod timing;
#[path = "wrap/unsafe_handling.rs"]
mod unsafe_handling;
#[path = "wrap/unwaited.rs"]
mod unwaited;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};

/// The sample definition the e2e test (tests/e2e/70-wrap.test.mjs) also runs.
fn sample_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/fixtures/wrap-sample.asl.json")
}

fn sample() -> Value {
    let text = std::fs::read_to_string(sample_path()).expect("the sample definition is readable");
    serde_json::from_str(&text).expect("the sample definition is JSON")
}

fn wrap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .arg("wrap")
        .args(args)
        .output()
        .expect("sfn-lock runs")
}

/// A file of its own in the temporary directory, holding `text`.
fn scratch_file(text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "sfn-lock-wrap-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("a scratch file can be written");
    path
}

/// The definition a wrap printed, once it succeeded with no warning: its
/// stderr is the three notes (which errors hold the lock, the timeout, the
/// lease), each also in the output's Comment.
fn stdout_json(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let wrapped: Value = serde_json::from_slice(&out.stdout).expect("the output is JSON");
    let comment = wrapped["Comment"].as_str().expect("a Comment");
    let notes: Vec<&str> = stderr.lines().collect();
    assert_eq!(notes.len(), 3, "{stderr}");
    for note in notes {
        let (_, said) = note
            .strip_prefix("sfn-lock: ")
            .and_then(|note| note.split_once(".json: "))
            .unwrap_or_else(|| panic!("sfn-lock: FILE: NOTE, not {note:?}"));
        assert!(comment.contains(said), "{said:?} in the Comment: {comment}");
    }
    wrapped
}

/// The warning lines of a wrap's stderr.
fn warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|line| line.starts_with("sfn-lock: warning: "))
        .map(String::from)
        .collect()
}

/// A refusal: `status`, nothing on stdout, one `sfn-lock: ` line on stderr
/// containing `expected`.
fn assert_refused(out: &Output, status: i32, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
}

fn refused_definition(definition: &Value, expected: &str) {
    let path = scratch_file(&definition.to_string());
    let out = wrap(&[
        "--lock-name",
        "orders",
        path.to_str().expect("a UTF-8 path"),
    ]);
    let _ = std::fs::remove_file(&path);
    assert_refused(&out, 1, expected);
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("sfn-lock: "));
}

#[test]
fn wraps_the_users_states_in_the_locked_workflow() {
    let sample_path = sample_path();
    let out = wrap(&[
        "--lock-name",
        "orders",
        "--limit",
        "2",
        sample_path.to_str().expect("UTF-8"),
    ]);
    let wrapped = stdout_json(&out);
    let user = sample();

    assert_eq!(wrapped["StartAt"], json!("Acquire Lock"));
    // The user's 60 + the default --max-wait-seconds 3600 + 285 s the acquire
    // may take past it + the held path's 900 + 303 s of release (wrap/timing.rs).
    assert_eq!(
        wrapped["TimeoutSeconds"],
        json!(60 + 3600 + 285 + 900 + 303)
    );
    let branches = &wrapped["States"]["Run Workload Under Lock"]["Branches"];
    assert_eq!(
        branches,
        &json!([{"StartAt": user["StartAt"], "States": user["States"]}])
    );
    let acquire = &wrapped["States"]["Acquire Lock"]["Parameters"];
    assert_eq!(acquire["FunctionName"], json!("${AcquireLockFunctionArn}"));
    assert_eq!(acquire["Payload"]["lockName"], json!("orders"));
    assert_eq!(acquire["Payload"]["limit"], json!(2));
    assert_eq!(acquire["Payload"]["leaseSeconds"], json!(5148 + 900 + 300));
    assert_eq!(acquire["Payload"]["maxWaitSeconds"], json!(3600));
    let release = &wrapped["States"]["Release Lock"]["Parameters"];
    assert_eq!(release["FunctionName"], json!("${ReleaseLockFunctionArn}"));
    let comment = wrapped["Comment"].as_str().expect("a Comment");
    assert!(
        comment.starts_with(user["Comment"].as_str().expect("the sample's Comment")),
        "{comment}"
    );
}

#[test]
fn skip_mode_and_a_lock_per_key() {
    let sample_path = sample_path();
    let out = wrap(&[
        "--mode",
        "skip",
        "--lock-name-path",
        "$.orderId",
        sample_path.to_str().expect("UTF-8"),
    ]);
    let wrapped = stdout_json(&out);
    assert_eq!(
        wrapped["States"]["Acquire Lock"]["Catch"][2]["Next"],
        json!("Parse Lock Held")
    );
    assert_eq!(wrapped["States"]["Skipped"]["Type"], json!("Pass"));
    for state in ["Acquire Lock", "Release Lock", "Release Lock After Failure"] {
        let payload = &wrapped["States"][state]["Parameters"]["Payload"];
        assert_eq!(
            payload["lockName.$"],
            json!("$$.Execution.Input.orderId"),
            "{state}"
        );
        assert_eq!(payload.get("lockName"), None, "{state}");
    }
    assert_eq!(
        wrapped["States"]["Acquire Lock"]["Parameters"]["Payload"].get("maxWaitSeconds"),
        None
    );
}

#[test]
fn help_names_the_flags_the_placeholders_and_the_exit_statuses() {
    let out = wrap(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "<LOCK>",
        "--lock-name-path <JSONPATH>",
        "--limit <N>",
        "--mode <MODE>",
        "--max-wait-seconds",
        "added to your TimeoutSeconds",
        "--pass-lock-to-workload",
        "--allow-unsafe-error-handling",
        "--partition <PARTITION>",
        "[default: aws]",
        "<DEFINITION.json>",
        "${AcquireLockFunctionArn}",
        "Exit status: 0",
    ] {
        assert!(
            help.contains(expected),
            "expected {expected:?} in --help:\n{help}"
        );
    }
}

/// The sample with `edit` applied, wrapped with `args` (and `--lock-name orders`).
fn wrap_edited(edit: impl FnOnce(&mut Value), args: &[&str]) -> Output {
    let mut definition = sample();
    edit(&mut definition);
    let path = scratch_file(&definition.to_string());
    let mut all = vec!["--lock-name", "orders"];
    all.extend_from_slice(args);
    all.push(path.to_str().expect("a UTF-8 path"));
    let out = wrap(&all);
    let _ = std::fs::remove_file(&path);
    out
}

#[test]
fn the_comment_warns_against_redrive() {
    for mode in ["wait", "skip"] {
        let wrapped = stdout_json(&wrap_edited(|_| {}, &["--mode", mode]));
        let comment = wrapped["Comment"].as_str().expect("a Comment");
        assert!(
            comment.contains("Do not redrive an execution of this state machine"),
            "{mode}: {comment}"
        );
    }
}

/// The Resource of each of the wrapped definition's top-level states that has one (the
/// lock's own: the user's states are in the branch).
fn lock_state_resources(wrapped: &Value) -> Vec<(String, String)> {
    wrapped["States"]
        .as_object()
        .expect("States")
        .iter()
        .filter_map(|(name, state)| {
            state["Resource"]
                .as_str()
                .map(|resource| (name.clone(), resource.to_owned()))
        })
        .collect()
}

#[test]
fn the_lock_states_take_the_partition_and_the_users_own_arns_stay() {
    let user_resource = |wrapped: &Value| {
        wrapped["States"]["Run Workload Under Lock"]["Branches"][0]["States"]["Run Workload"]
            ["Resource"]
            .clone()
    };
    for (args, prefix) in [
        (vec![], "arn:aws:states:::"),
        (vec!["--partition", "aws-cn"], "arn:aws-cn:states:::"),
        (
            vec!["--partition", "aws-us-gov"],
            "arn:aws-us-gov:states:::",
        ),
        (
            vec!["--partition", "${Partition}"],
            "arn:${Partition}:states:::",
        ),
        (
            vec!["--mode", "skip", "--partition", "aws-cn"],
            "arn:aws-cn:states:::",
        ),
    ] {
        let wrapped = stdout_json(&wrap_edited(|_| {}, &args));
        let resources = lock_state_resources(&wrapped);
        assert!(resources.len() >= 3, "{args:?}: {resources:?}");
        for (state, resource) in &resources {
            assert!(
                resource.starts_with(prefix),
                "{args:?}: {state}: {resource}"
            );
        }
        // The sample's own task is the user's: its ARN is left as written.
        assert_eq!(
            user_resource(&wrapped),
            json!("arn:aws:states:::lambda:invoke"),
            "{args:?}"
        );
    }
}
