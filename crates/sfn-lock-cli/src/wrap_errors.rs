//! The user's error handling that would let the lock go while work runs on
//! (wrap.rs, "The user's Retry and Catch"): a Retry or Catch on an error
//! after which a task's work may still be running, and (wrap_tolerated) a
//! Map that tolerates failed items. Each is refused in one line naming the
//! state and the field, or, with --allow-unsafe-error-handling, wrapped with
//! one warning line each.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::states::for_each_state;
use super::tolerated::tolerated_failures;

/// The catch-alls that include the errors after which work may still run.
const CATCH_ALLS: [&str; 2] = ["States.ALL", "States.TaskFailed"];

/// What to do about a Retry or Catch on such an error instead.
const RETRY_CATCH_REMEDY: &str = "remove it and let the lock's own states handle these errors \
    (they hold the lock until the work has stopped, then fail the execution with the error): \
    retry or catch only errors after which the work did not start or has ended, such as \
    Lambda.TooManyRequestsException, or your own error names";

/// One offending field of one state.
pub(crate) struct Unsafe {
    /// Where, on what, and why it is unsafe, in one line.
    pub(crate) description: String,
    /// What to do instead, for the refusal.
    pub(crate) remedy: &'static str,
}

/// The errors after which a task's work may still be running, read from a
/// reviewed definition (`template`, placeholders filled in): the ErrorEquals
/// of the workload state's catcher that holds the lock in `wait_state`, plus
/// the catch-alls that include them.
pub(crate) fn work_may_still_run(
    template: &Value,
    workload_state: &str,
    wait_state: &str,
) -> Result<BTreeSet<String>, String> {
    let catchers = template
        .pointer(&format!("/States/{workload_state}/Catch"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut names: BTreeSet<String> = catchers
        .filter(|catcher| catcher.get("Next").and_then(Value::as_str) == Some(wait_state))
        .filter_map(|catcher| catcher.get("ErrorEquals").and_then(Value::as_array))
        .flatten()
        .filter_map(|name| name.as_str().map(String::from))
        .collect();
    if names.is_empty() {
        return Err(format!(
            "\"{workload_state}\" has no Catch with ErrorEquals leading to \"{wait_state}\""
        ));
    }
    names.extend(CATCH_ALLS.map(String::from));
    Ok(names)
}

/// The warnings for the unsafe error handling in `states`, at any depth (the
/// first offender, by state name, depth first), or the refusal of the first
/// without `allow_unsafe` (--allow-unsafe-error-handling).
pub(crate) fn unsafe_error_handling(
    states: &Map<String, Value>,
    work_may_still_run: &BTreeSet<String>,
    allow_unsafe: bool,
) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for_each_state(states, &mut |name, state| {
        found.extend(unsafe_retry_and_catch(name, state, work_may_still_run));
        found.extend(tolerated_failures(name, state));
        Ok(())
    })?;
    match found.first() {
        Some(first) if !allow_unsafe => Err(format!(
            "{}; {}; or pass --allow-unsafe-error-handling to wrap it anyway",
            first.description, first.remedy
        )),
        _ => Ok(found
            .into_iter()
            .map(|found| {
                format!(
                    "{} (wrapped anyway: --allow-unsafe-error-handling)",
                    found.description
                )
            })
            .collect()),
    }
}

/// Each Retry and Catch entry of `state` on an error after which the work
/// may still be running.
fn unsafe_retry_and_catch(
    name: &str,
    state: &Map<String, Value>,
    work_may_still_run: &BTreeSet<String>,
) -> Vec<Unsafe> {
    let mut found = Vec::new();
    for field in ["Retry", "Catch"] {
        let entries = state.get(field).and_then(Value::as_array);
        for entry in entries.into_iter().flatten() {
            // A retrier with MaxAttempts 0 never retries.
            if field == "Retry" && entry.get("MaxAttempts").and_then(Value::as_u64) == Some(0) {
                continue;
            }
            let errors: Vec<&str> = entry
                .get("ErrorEquals")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|error| work_may_still_run.contains(*error))
                .collect();
            if !errors.is_empty() {
                found.push(Unsafe {
                    description: describe_unsafe(name, field, &errors),
                    remedy: RETRY_CATCH_REMEDY,
                });
            }
        }
    }
    found
}

/// One offending Retry or Catch entry: where, on what, and why it is unsafe.
fn describe_unsafe(state: &str, field: &str, errors: &[&str]) -> String {
    let which = if errors.iter().any(|error| CATCH_ALLS.contains(error)) {
        ", which includes States.Timeout and the Lambda service errors,"
    } else {
        ","
    };
    let why = if field == "Retry" {
        "a retry starts a second run beside the first, and the lock is released when your \
         states end, while the first may run on"
    } else {
        "the Catch handles the error inside the lock's branch, so the lock's own Catch, which \
         would hold the lock until the work has stopped, never sees it: the lock is released \
         at once while the work may run on"
    };
    format!(
        "state \"{state}\" has a {field} on {}{which} after which its work may still be \
         running: {why}",
        errors.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::{check_with, refusal, sample, with_nested, work_may_still_run_in};
    use super::super::template::Mode;
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
        let moved = json!({"States": {"W": {"Catch": [{"ErrorEquals": ["X"], "Next": "Z"}]}}});
        let error = work_may_still_run(&moved, "W", "Wait").expect_err("no such catcher");
        assert!(error.contains("Wait"), "{error}");
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
        assert!(
            checked.warnings[0].starts_with("state \"B\" has a Catch on Lambda.AWSLambdaException")
        );
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
}
