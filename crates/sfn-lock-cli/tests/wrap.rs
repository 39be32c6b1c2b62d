//! `sfn-lock wrap` as a real process: what it prints for a definition it can
//! wrap, and, for each kind of input it refuses, one line on stderr, nothing
//! on stdout and its exit status (1 for the definition, 2 for the flags).
//! No local stack needed: wrap only reads a file.

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

fn stdout_json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the output is JSON")
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
    assert_eq!(
        wrapped["TimeoutSeconds"],
        json!(user["TimeoutSeconds"].as_u64().expect("a timeout") + 3600),
        "the user's timeout plus the default --max-wait-seconds"
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
    assert_eq!(
        acquire["Payload"]["leaseSeconds.$"],
        json!("States.MathAdd(States.MathAdd(3660, 900), 300)")
    );
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
fn a_missing_file_is_refused() {
    let missing =
        std::env::temp_dir().join(format!("sfn-lock-wrap-missing-{}.json", std::process::id()));
    let out = wrap(&["--lock-name", "orders", missing.to_str().expect("UTF-8")]);
    assert_refused(&out, 1, "cannot read");
    assert_refused(&out, 1, "No such file");
}

#[test]
fn malformed_definitions_are_refused() {
    for (text, expected) in [
        ("{\"StartAt\": \"A\",", "not JSON"),
        (
            "{\"TimeoutSeconds\": ${Timeout}, \"StartAt\": \"A\"}",
            "placeholder outside a string",
        ),
        ("[]", "the top level is an array, not an object"),
        ("{\"TimeoutSeconds\": 60, \"States\": {}}", "has no StartAt"),
    ] {
        let path = scratch_file(text);
        let out = wrap(&["--lock-name", "orders", path.to_str().expect("UTF-8")]);
        let _ = std::fs::remove_file(&path);
        assert_refused(&out, 1, expected);
    }
}

#[test]
fn definitions_that_cannot_run_in_the_branch_are_refused() {
    let mut jsonata = sample();
    jsonata["QueryLanguage"] = json!("JSONata");
    refused_definition(
        &jsonata,
        "cannot wrap: QueryLanguage \"JSONata\" at the top level",
    );

    let mut jsonata_state = sample();
    jsonata_state["States"]["Summarize"]["QueryLanguage"] = json!("JSONata");
    refused_definition(
        &jsonata_state,
        "QueryLanguage \"JSONata\" in state \"Summarize\"",
    );

    let mut collision = sample();
    let states = collision["States"].as_object_mut().expect("States");
    let done = states.remove("Done").expect("the sample has Done");
    states.insert("Release Lock After Failure".into(), done);
    collision["States"]["Summarize"]["Next"] = json!("Release Lock After Failure");
    refused_definition(
        &collision,
        "state \"Release Lock After Failure\" has the name of one of the lock's states",
    );

    let mut no_timeout = sample();
    no_timeout
        .as_object_mut()
        .map(|top| top.remove("TimeoutSeconds"));
    refused_definition(&no_timeout, "no top-level TimeoutSeconds");
}

#[test]
fn a_wrapped_definition_is_not_wrapped_again() {
    let sample_path = sample_path();
    let once = wrap(&[
        "--lock-name",
        "orders",
        sample_path.to_str().expect("UTF-8"),
    ]);
    let wrapped = stdout_json(&once);
    refused_definition(&wrapped, "it is locked already");
}

#[test]
fn bad_flags_are_usage_errors() {
    let sample_path = sample_path();
    let sample = sample_path.to_str().expect("UTF-8");
    for (args, expected) in [
        (vec![sample], "--lock-name"),
        (
            vec!["--lock-name", "a", "--lock-name-path", "$.b", sample],
            "cannot be used with",
        ),
        (vec!["--lock-name", "a", "--limit", "0", sample], "--limit"),
        (
            vec!["--lock-name", "a", "--limit", "1001", sample],
            "--limit",
        ),
        (vec!["--lock-name", "", sample], "a lock name has 1 to 1024"),
        (
            vec!["--lock-name-path", "orderId", sample],
            "a JSONPath into the execution input",
        ),
        (
            vec!["--lock-name", "a", "--mode", "queue", sample],
            "--mode",
        ),
        (
            vec![
                "--lock-name",
                "a",
                "--mode",
                "skip",
                "--max-wait-seconds",
                "5",
                sample,
            ],
            "--mode skip never waits",
        ),
        (
            vec![
                "--lock-name",
                "a",
                "--workload-max-run-seconds",
                "29",
                sample,
            ],
            "--workload-max-run-seconds",
        ),
        (
            vec!["--lock-name", "a", "--partition", "aws:cn", sample],
            "--partition",
        ),
        (
            vec!["--lock-name", "a", "--partition", "${Partition", sample],
            "a partition such as aws, aws-cn or aws-us-gov",
        ),
    ] {
        let out = wrap(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in: {stderr}"
        );
    }
}

#[test]
fn help_names_the_flags_the_placeholders_and_the_exit_statuses() {
    let out = wrap(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "--lock-name <NAME>",
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

/// The Retry that AWS's "Handle transient Lambda service exceptions" best
/// practice tells users to add to every Lambda task.
fn aws_best_practice_retry() -> Value {
    json!([{
        "ErrorEquals": [
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException"
        ],
        "IntervalSeconds": 2,
        "MaxAttempts": 6,
        "BackoffRate": 2
    }])
}

/// A Map whose item processor times its task out and retries the timeout.
fn nested_timeout_retry(definition: &mut Value) {
    definition["States"]["Summarize"] = json!({
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "Ship Item",
            "States": {
                "Ship Item": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "${ShipFunctionArn}", "Payload.$": "$"},
                    "TimeoutSeconds": 5,
                    "Retry": [{"ErrorEquals": ["States.Timeout"], "MaxAttempts": 2}],
                    "End": true
                }
            }
        },
        "Next": "Done"
    });
}

#[test]
fn error_handling_that_would_free_the_lock_under_running_work_is_refused() {
    let out = wrap_edited(
        |definition| definition["States"]["Run Workload"]["Retry"] = aws_best_practice_retry(),
        &[],
    );
    assert_refused(
        &out,
        1,
        "state \"Run Workload\" has a Retry on Lambda.ServiceException",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "Lambda.TooManyRequestsException",
        "--allow-unsafe-error-handling",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in: {stderr}");
    }

    let out = wrap_edited(
        |definition| {
            definition["States"]["Run Workload"]["Catch"] =
                json!([{"ErrorEquals": ["States.ALL"], "Next": "Reject Order"}]);
        },
        &[],
    );
    assert_refused(&out, 1, "state \"Run Workload\" has a Catch on States.ALL");

    let out = wrap_edited(nested_timeout_retry, &[]);
    assert_refused(&out, 1, "state \"Ship Item\" has a Retry on States.Timeout");
}

#[test]
fn retrying_errors_after_which_nothing_runs_still_wraps() {
    let out = wrap_edited(
        |definition| {
            definition["States"]["Run Workload"]["Retry"] = json!([
                {"ErrorEquals": ["Order.Flaky"], "MaxAttempts": 2},
                {"ErrorEquals": ["Lambda.TooManyRequestsException"], "MaxAttempts": 3}
            ]);
        },
        &[],
    );
    let wrapped = stdout_json(&out);
    let branch = &wrapped["States"]["Run Workload Under Lock"]["Branches"][0];
    assert_eq!(
        branch["States"]["Run Workload"]["Retry"][1]["ErrorEquals"],
        json!(["Lambda.TooManyRequestsException"])
    );
}

#[test]
fn allow_unsafe_error_handling_wraps_with_one_warning_per_retrier_or_catcher() {
    let out = wrap_edited(
        |definition| {
            definition["States"]["Run Workload"]["Retry"] = aws_best_practice_retry();
            definition["States"]["Run Workload"]["Catch"] =
                json!([{"ErrorEquals": ["States.ALL"], "Next": "Reject Order"}]);
            nested_timeout_retry(definition);
        },
        &["--allow-unsafe-error-handling"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let wrapped: Value = serde_json::from_slice(&out.stdout).expect("the output is JSON");
    assert_eq!(
        wrapped["States"]["Run Workload Under Lock"]["Branches"][0]["States"]["Run Workload"]
            ["Retry"],
        aws_best_practice_retry(),
        "wrapped as written"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(
        lines
            .iter()
            .all(|line| line.starts_with("sfn-lock: warning: ")),
        "{stderr}"
    );
    for expected in [
        "state \"Run Workload\" has a Retry on Lambda.ServiceException",
        "state \"Run Workload\" has a Catch on States.ALL",
        "state \"Ship Item\" has a Retry on States.Timeout",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in: {stderr}");
    }
}

#[test]
fn the_wait_for_the_lock_is_added_to_the_users_timeout() {
    let wait_default = stdout_json(&wrap_edited(|_| {}, &[]));
    assert_eq!(wait_default["TimeoutSeconds"], json!(60 + 3600));
    assert_eq!(
        wait_default["States"]["Acquire Lock"]["Parameters"]["Payload"]["leaseSeconds.$"],
        json!("States.MathAdd(States.MathAdd(3660, 900), 300)")
    );
    let comment = wait_default["Comment"].as_str().expect("a Comment");
    assert!(
        comment.contains("TimeoutSeconds is this definition's own 60"),
        "{comment}"
    );
    // The stack's acquire-lock refuses leases above its MaxLeaseSeconds: the
    // Comment says what this one asks for, 3660 + 900 + 300.
    assert!(
        comment.contains("Its acquires ask for a lease of 4860 s"),
        "{comment}"
    );

    let short = stdout_json(&wrap_edited(|_| {}, &["--max-wait-seconds", "120"]));
    assert_eq!(short["TimeoutSeconds"], json!(180));
    assert_eq!(
        short["States"]["Acquire Lock"]["Parameters"]["Payload"]["maxWaitSeconds"],
        json!(120)
    );

    let skip = stdout_json(&wrap_edited(|_| {}, &["--mode", "skip"]));
    assert_eq!(skip["TimeoutSeconds"], json!(60), "skip mode never waits");
    let skip_comment = skip["Comment"].as_str().expect("a Comment");
    assert!(
        skip_comment.contains("Its acquires ask for a lease of 1260 s"),
        "{skip_comment}"
    );

    let longest: u64 = 31_536_000 - 3600 - 900 - 300;
    let fits = wrap_edited(
        |definition| definition["TimeoutSeconds"] = json!(longest),
        &[],
    );
    assert_eq!(
        stdout_json(&fits)["TimeoutSeconds"],
        json!(31_536_000 - 1200)
    );
    let over = wrap_edited(
        |definition| definition["TimeoutSeconds"] = json!(longest + 1),
        &[],
    );
    assert_refused(&over, 1, "--max-wait-seconds + --workload-max-run-seconds");
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

/// The sample's Summarize as a Distributed Map with `tolerance` fields.
fn distributed_map_with(tolerance: Value) -> impl FnOnce(&mut Value) {
    move |definition| {
        let mut map = json!({
            "Type": "Map",
            "ItemsPath": "$.items",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                "StartAt": "Ship Item",
                "States": {
                    "Ship Item": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::lambda:invoke",
                        "Parameters": {"FunctionName": "${ShipFunctionArn}", "Payload.$": "$"},
                        "TimeoutSeconds": 5,
                        "End": true
                    }
                }
            },
            "Next": "Done"
        });
        for (field, value) in tolerance.as_object().expect("fields") {
            map[field] = value.clone();
        }
        definition["States"]["Summarize"] = map;
    }
}

#[test]
fn a_map_that_tolerates_failed_items_is_refused_unless_allowed() {
    let out = wrap_edited(
        distributed_map_with(json!({"ToleratedFailurePercentage": 5})),
        &[],
    );
    assert_refused(
        &out,
        1,
        "state \"Summarize\" has ToleratedFailurePercentage 5:",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-unsafe-error-handling"), "{stderr}");

    let out = wrap_edited(
        distributed_map_with(json!({"ToleratedFailureCountPath": "$.tolerated"})),
        &[],
    );
    assert_refused(
        &out,
        1,
        "state \"Summarize\" has ToleratedFailureCountPath \"$.tolerated\"",
    );

    let out = wrap_edited(
        distributed_map_with(json!({"ToleratedFailureCount": 2})),
        &["--allow-unsafe-error-handling"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let wrapped: Value = serde_json::from_slice(&out.stdout).expect("the output is JSON");
    assert_eq!(
        wrapped["States"]["Run Workload Under Lock"]["Branches"][0]["States"]["Summarize"]
            ["ToleratedFailureCount"],
        json!(2),
        "wrapped as written"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("sfn-lock: warning: ")
            && lines[0].contains("state \"Summarize\" has ToleratedFailureCount 2"),
        "{stderr}"
    );

    // Tolerating no failure is the default, and safe.
    let zero = wrap_edited(
        distributed_map_with(json!({
            "ToleratedFailureCount": 0,
            "ToleratedFailurePercentage": 0
        })),
        &[],
    );
    stdout_json(&zero);
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
