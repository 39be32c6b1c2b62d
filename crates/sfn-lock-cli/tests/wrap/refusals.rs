//! What wrap refuses: one line on stderr, nothing on stdout, status 1 for
//! the definition and 2 for the flags.

use serde_json::json;

use super::{
    assert_refused, refused_definition, sample, sample_path, scratch_file, stdout_json, wrap,
};

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
    // A JSONPath state in a JSONata machine (Step Functions refuses it).
    let mut mixed = sample();
    mixed["QueryLanguage"] = json!("JSONata");
    mixed["States"]["Summarize"]["QueryLanguage"] = json!("JSONPath");
    refused_definition(
        &mixed,
        "cannot wrap: QueryLanguage JSONPath in state \"Summarize\" of a JSONata state machine",
    );
    let mut unknown = sample();
    unknown["QueryLanguage"] = json!("XPath");
    refused_definition(&unknown, "QueryLanguage \"XPath\" at the top level");

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
