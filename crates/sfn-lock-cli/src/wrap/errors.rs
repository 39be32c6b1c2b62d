//! The user's error handling that would let the lock go while work runs on
//! (wrap.rs, "The user's Retry and Catch"): a Retry or Catch on an error
//! after which a task's work may still be running (any error of a Map, a
//! Parallel, a `.sync`, `.sync:2` or `.waitForTaskToken` Task or an
//! activity), (tolerated.rs) a Map that tolerates failed items, and
//! (unwaited.rs) a Task that starts work it does not wait for. Each is refused in one line naming the
//! state and the field, or, with --allow-unsafe-error-handling, wrapped with
//! one warning line each.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::shape::arn_parts;
use super::states::for_each_state;
use super::template::{SAMPLE_TASK, WORKLOAD_STATE};
use super::tolerated::tolerated_failures;
use super::unwaited::unwaited_work;

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

/// The errors after which a Lambda invocation may still be running, in the
/// order of a reviewed definition (`template`, filled in): the ErrorEquals
/// of the catchers of its sample Task before its catch-all, which takes the
/// errors that prove the invocation ended (catchers are tried in order).
/// Read from the file, so that wrap and the file cannot drift apart.
pub(crate) fn may_still_run_errors(template: &Value) -> Result<Vec<String>, String> {
    let catchers = template
        .pointer(&format!(
            "/States/{WORKLOAD_STATE}/Branches/0/States/{SAMPLE_TASK}/Catch"
        ))
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut names = Vec::new();
    for catcher in catchers {
        let errors = catcher.get("ErrorEquals").and_then(Value::as_array);
        let errors: Vec<&str> = errors
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if errors.contains(&"States.ALL") {
            if names.is_empty() {
                break;
            }
            return Ok(names);
        }
        names.extend(errors.into_iter().map(String::from));
    }
    Err(format!(
        "\"{SAMPLE_TASK}\" in \"{WORKLOAD_STATE}\" has no Catch with errors before a States.ALL \
         catcher"
    ))
}

/// `may_still_run` and the catch-alls that include them: what the user's
/// Retry and Catch must not name.
pub(crate) fn work_may_still_run(may_still_run: &[String]) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = may_still_run.iter().cloned().collect();
    names.extend(CATCH_ALLS.map(String::from));
    names
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
        found.extend(unwaited_work(name, state));
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
/// may still be running: on a Map or Parallel, every error (one failing
/// item or branch stops the others as states, while their invocations run
/// on); on a Task that waits for work outside it (`waits_on`), every error;
/// elsewhere those in `work_may_still_run`.
fn unsafe_retry_and_catch(
    name: &str,
    state: &Map<String, Value>,
    work_may_still_run: &BTreeSet<String>,
) -> Vec<Unsafe> {
    let side_by_side = matches!(
        state.get("Type").and_then(Value::as_str),
        Some("Map" | "Parallel")
    );
    let waits_on = waits_on(state);
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
                .filter(|error| {
                    side_by_side || waits_on.is_some() || work_may_still_run.contains(*error)
                })
                .collect();
            if !errors.is_empty() {
                found.push(Unsafe {
                    description: match (side_by_side, waits_on) {
                        (true, _) => describe_side_by_side(name, field, &errors),
                        (false, Some(work)) => describe_waiting(name, field, &errors, work),
                        (false, None) => describe_unsafe(name, field, &errors),
                    },
                    remedy: match waits_on {
                        Some(_) => WAITING_REMEDY,
                        None => RETRY_CATCH_REMEDY,
                    },
                });
            }
        }
    }
    found
}

/// What `state` waits for, if it is a Task that waits for work outside it:
/// a job (`.sync`, `.sync:2`), a callback (`.waitForTaskToken`) or an
/// activity's worker. No error name proves that work has not started or
/// has ended: a `.sync` Task's service errors come from the call that
/// starts the job (nothing runs) and from the polling that watches it (the
/// job runs on) alike, and a callback's or an activity's from the call that
/// hands the work over and from the worker alike.
fn waits_on(state: &Map<String, Value>) -> Option<&'static str> {
    if state.get("Type").and_then(Value::as_str) != Some("Task") {
        return None;
    }
    let resource = state.get("Resource").and_then(Value::as_str)?;
    if resource.ends_with(".sync") || resource.ends_with(".sync:2") {
        Some("a job (.sync)")
    } else if resource.ends_with(".waitForTaskToken") {
        Some("a callback (.waitForTaskToken)")
    } else if arn_parts(resource)
        .get(2..6)
        .is_some_and(|parts| parts[0] == "states" && parts[3] == "activity")
    {
        Some("an activity's worker")
    } else {
        None
    }
}

/// What to do about a Retry or Catch on a Task that waits for work instead.
const WAITING_REMEDY: &str = "remove it and let the lock's own states handle these errors \
    (they hold the lock until the work has stopped, then fail the execution with the error); \
    retry inside the job or the worker, or start it again from a new execution";

/// A Retry or Catch on a Task that waits for `work`: where, on what, and why.
fn describe_waiting(state: &str, field: &str, errors: &[&str], work: &str) -> String {
    let why = if field == "Retry" {
        "a retry starts it a second time beside the first"
    } else {
        "the Catch lets your states go on, and end, and the lock be released, while it runs"
    };
    format!(
        "state \"{state}\" has a {field} on {}: it waits for {work}, and no error of it proves \
         that the work did not start or has ended (the same names come from the call that starts \
         it and from the wait for it), so the work may still run, and {why}",
        errors.join(", ")
    )
}

/// A Retry or Catch on a Map or Parallel: where, on what, and why any error
/// there is unsafe.
fn describe_side_by_side(state: &str, field: &str, errors: &[&str]) -> String {
    let why = if field == "Retry" {
        "a retry starts the items or branches again beside those still running"
    } else {
        "the Catch lets your states go on, and end, and the lock be released, while \
         they still run"
    };
    format!(
        "state \"{state}\" has a {field} on {}: on a Map or Parallel, any error leaves the \
         invocations of the other items or branches running after it (Step Functions stops \
         them as states only), and {why}",
        errors.join(", ")
    )
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
mod tests;
