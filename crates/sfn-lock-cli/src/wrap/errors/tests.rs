//! errors.rs' tests: the errors read from the reviewed file, and the
//! user's Retry and Catch refused or let through with a warning.

use serde_json::json;

use super::super::fixtures::{
    check_with, refusal, sample, settings, with_nested, work_may_still_run_in,
};
use super::super::template::{Mode, Template};
use super::*;

#[test]
fn the_errors_after_which_work_may_still_run_are_the_reviewed_files() {
    for mode in [Mode::Wait, Mode::Skip] {
        let set = work_may_still_run_in(mode);
        for name in [
            "States.Timeout",
            "States.HeartbeatTimeout",
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException",
            "Lambda.ClientExecutionTimeoutException",
            "States.ALL",
            "States.TaskFailed",
        ] {
            assert!(set.contains(name), "{mode:?}: {name} in {set:?}");
        }
        // Errors after which the function did not start or has ended.
        for name in ["Lambda.TooManyRequestsException", "Lambda.Unknown"] {
            assert!(!set.contains(name), "{mode:?}: {name} in {set:?}");
        }
    }
    let mut moved = Template::load(&settings(), 1)
        .expect("template loads")
        .value;
    let catch = &mut moved["States"][WORKLOAD_STATE]["Branches"][0]["States"][SAMPLE_TASK]["Catch"];
    *catch = json!([{"ErrorEquals": ["States.ALL"], "Next": "Elsewhere"}]);
    let error = may_still_run_errors(&moved).expect_err("no such catcher");
    assert!(error.contains("before a States.ALL"), "{error}");
}

#[test]
fn refuses_retry_or_catch_on_errors_after_which_work_may_still_run_at_any_depth() {
    let retry = refusal(with_nested(
        "Retry",
        json!([
            {"ErrorEquals": ["Custom.Error"]},
            {
                "ErrorEquals": ["Lambda.ServiceException", "Lambda.SdkClientException"],
                "MaxAttempts": 6
            }
        ]),
    ));
    assert!(
        retry.starts_with(
            "state \"C\" has a Retry on Lambda.ServiceException, Lambda.SdkClientException, \
             after which its work may still be running: a retry"
        ),
        "{retry}"
    );
    for expected in [
        "Lambda.TooManyRequestsException",
        "your own error names",
        "--allow-unsafe-error-handling",
    ] {
        assert!(retry.contains(expected), "{expected:?} in {retry}");
    }
    assert!(!retry.contains('\n'), "one line: {retry}");

    let catch = refusal(with_nested(
        "Catch",
        json!([{"ErrorEquals": ["States.TaskFailed"], "Next": "C"}]),
    ));
    assert!(
        catch.starts_with("state \"C\" has a Catch on States.TaskFailed, which includes"),
        "{catch}"
    );
    assert!(catch.contains("released at once"), "{catch}");

    // On the user's own Parallel, and in a Map's processor (old and new field).
    let mut parallel = sample();
    parallel["States"]["B"]["Retry"] = json!([{"ErrorEquals": ["States.Timeout"]}]);
    assert!(refusal(parallel).starts_with("state \"B\" has a Retry on States.Timeout"));
    for processor in ["ItemProcessor", "Iterator"] {
        let mut map = sample();
        map["States"]["B"] = json!({"Type": "Map", processor: {
            "StartAt": "M",
            "States": {"M": {
                "Type": "Task",
                "Resource": "r",
                "End": true,
                "Catch": [{"ErrorEquals": ["States.HeartbeatTimeout"], "Next": "M"}]
            }}
        }, "End": true});
        let error = refusal(map);
        assert!(
            error.starts_with("state \"M\" has a Catch on States.HeartbeatTimeout"),
            "{processor}: {error}"
        );
    }
}

#[test]
fn allows_retry_and_catch_on_errors_after_which_nothing_runs() {
    for (field, handling) in [
        (
            "Retry",
            json!([{"ErrorEquals": ["Lambda.TooManyRequestsException"]}]),
        ),
        (
            "Retry",
            json!([{"ErrorEquals": ["Order.Flaky", "Lambda.Unknown"]}]),
        ),
        // MaxAttempts 0: the error is never retried.
        (
            "Retry",
            json!([{"ErrorEquals": ["States.ALL"], "MaxAttempts": 0}]),
        ),
        (
            "Catch",
            json!([{"ErrorEquals": ["Order.Rejected"], "Next": "C"}]),
        ),
    ] {
        let definition = with_nested(field, handling.clone());
        let checked = check_with(&definition, false);
        assert!(checked.is_ok(), "{field} {handling}: {checked:?}");
    }
}

#[test]
fn the_escape_hatch_warns_once_per_retrier_or_catcher() {
    let mut definition = with_nested(
        "Retry",
        json!([
            {"ErrorEquals": ["States.Timeout"]},
            {"ErrorEquals": ["Mine"]},
            {"ErrorEquals": ["States.ALL"]}
        ]),
    );
    definition["States"]["B"]["Catch"] =
        json!([{"ErrorEquals": ["Lambda.AWSLambdaException"], "Next": "A"}]);
    let checked = check_with(&definition, true).expect("wrapped anyway");
    assert_eq!(checked.warnings.len(), 3, "{:?}", checked.warnings);
    assert!(checked.warnings[0].starts_with("state \"B\" has a Catch on Lambda.AWSLambdaException"));
    assert!(checked.warnings[1].starts_with("state \"C\" has a Retry on States.Timeout"));
    assert!(checked.warnings[2].starts_with("state \"C\" has a Retry on States.ALL"));
    for warning in &checked.warnings {
        assert!(
            warning.ends_with("(wrapped anyway: --allow-unsafe-error-handling)"),
            "{warning}"
        );
    }
    let refused = check_with(&definition, false).expect_err("refused without the flag");
    assert!(refused.starts_with("state \"B\" has a Catch"), "{refused}");
}
