//! Which errors out of the user's states may release the lock at once: the
//! shape of the Parallel's Catch, decided from the user's own states.
//!
//! An error proves that work has ended only for one invocation at a time:
//! when work runs side by side (a Map, inline or distributed, a Parallel) a
//! failing piece stops the others only as states, their Lambda invocations,
//! jobs and workers run on, and a Distributed Map's Catch sees
//! States.ExceedToleratedFailureThreshold, not the item's error; work that
//! outlives its state (an activity, a `.sync` job, a `.waitForTaskToken`
//! callback, an asynchronous invoke) runs on whatever error ended the state.
//! So a list of error names cannot be trusted for such states, and a
//! definition with any of them, at any depth, holds the lock after every
//! error: `Catch: [States.ALL -> Wait For Workload To Stop]`.
//!
//! Only a definition whose states are all Pass, Wait, Choice, Succeed, Fail
//! or plain synchronous Lambda invocations (an allow-list: anything else,
//! an unknown Type or a Resource wrap cannot read included, counts as work
//! that may outlive its state) keeps the immediate release: its one running
//! invocation is the one whose error ends the branch, so the errors after
//! which it may still run (read from the file's sample Task) hold the lock
//! and every other error releases at once; catchers are tried in order.

use serde_json::{json, Map, Value};

use super::states::{for_each_state, invocation_type, Invocation};
use super::template::{RELEASE_AFTER_FAILURE_STATE, WAIT_STATE};

/// How the Parallel's Catch treats errors out of the user's states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One Lambda invocation at a time: errors that prove it ended release
    /// at once.
    Sequential,
    /// Work may run side by side or outlive its state: every error holds.
    /// The first such state by name, depth first, why, and how many more.
    MayOutlive {
        state: String,
        why: String,
        more: usize,
    },
}

/// The shape of `states` (a definition's top-level States), at any depth.
pub(crate) fn shape(states: &Map<String, Value>) -> Result<Shape, String> {
    let mut found = Vec::new();
    for_each_state(states, &mut |name, state| {
        if let Some(why) = may_outlive(state) {
            found.push((name.to_owned(), why));
        }
        Ok(())
    })?;
    let more = found.len().saturating_sub(1);
    Ok(match found.into_iter().next() {
        None => Shape::Sequential,
        Some((state, why)) => Shape::MayOutlive { state, why, more },
    })
}

impl Shape {
    /// The Parallel's Catch; `may_still_run` in the file's order.
    pub(crate) fn catch(&self, may_still_run: &[String]) -> Value {
        match self {
            Shape::Sequential => json!([
                {"ErrorEquals": may_still_run, "Next": WAIT_STATE},
                {"ErrorEquals": ["States.ALL"], "Next": RELEASE_AFTER_FAILURE_STATE}
            ]),
            Shape::MayOutlive { .. } => {
                json!([{"ErrorEquals": ["States.ALL"], "Next": WAIT_STATE}])
            }
        }
    }

    /// Which shape and why, in a sentence, for stderr and the Comment.
    /// `held` is how long the held path holds the lock, and why
    /// (Bounds::describe_held).
    pub(crate) fn describe(&self, held: &str) -> String {
        match self {
            Shape::Sequential => format!(
                "Your states run one Lambda invocation at a time (Pass, Wait, Choice, Succeed, \
                 Fail and plain Lambda Tasks only), so an error that proves the invocation ended \
                 releases the lock at once, and States.Timeout, States.HeartbeatTimeout and the \
                 Lambda service errors, after which it may still run, hold it {held} first."
            ),
            Shape::MayOutlive { state, why, more } => {
                let more = match more {
                    0 => String::new(),
                    1 => " (and 1 more such state)".to_owned(),
                    n => format!(" (and {n} more such states)"),
                };
                format!(
                    "Every error out of your states holds the lock {held} before it is \
                     released, because state \
                     \"{state}\" is {why}{more}: when work runs side by side or outlives its \
                     state, no error name proves that nothing runs."
                )
            }
        }
    }

    /// The Parallel's Comment in the output.
    pub(crate) fn workload_comment(&self, held: &str) -> String {
        format!(
            "sfn-lock wrap: one branch holding your states, so that one Catch covers them all. \
             {} The release after success is Release Lock; after an error, Release Lock After \
             Failure, which then fails the execution with that error.",
            self.describe(held)
        )
    }

    /// The Comment of Wait For Workload To Stop in the output.
    pub(crate) fn wait_comment(&self, held: &str) -> String {
        let after = match self {
            Shape::Sequential => "an error after which your Lambda invocation may still run",
            Shape::MayOutlive { .. } => "every error out of your states",
        };
        format!(
            "Reached after {after}: the lock stays held {held}, the longest a piece of your work \
             runs on after its state stopped, so the next execution cannot start beside it, then \
             is released. The data is the caught {{Error, \
             Cause}}, passed through unchanged for the re-raise. If this execution times out or \
             is stopped while waiting, the cleanup sweep releases the lock, no earlier than the \
             stack's WorkloadMaxRunSeconds after the execution ended; at worst the lease does."
        )
    }
}

/// The first Distributed Map, by name, depth first, whose child executions
/// are Express (ExecutionType other than STANDARD): those cannot be stopped
/// (StopExecution does not support Express state machines), so after an
/// error they run on up to their own 300 s, and their tasks' work after
/// that (timing.rs adds it to the held path).
pub(crate) fn express_child_map(states: &Map<String, Value>) -> Result<Option<String>, String> {
    let mut found = None;
    for_each_state(states, &mut |name, state| {
        let config = state
            .get("ItemProcessor")
            .and_then(|processor| processor.get("ProcessorConfig"));
        let mode = config.and_then(|config| config.get("Mode"));
        let execution_type = config.and_then(|config| config.get("ExecutionType"));
        let express = state.get("Type").and_then(Value::as_str) == Some("Map")
            && mode.and_then(Value::as_str) == Some("DISTRIBUTED")
            && execution_type.and_then(Value::as_str) != Some("STANDARD");
        if express && found.is_none() {
            found = Some(name.to_owned());
        }
        Ok(())
    })?;
    Ok(found)
}

/// Why `state` may run work side by side or outlive its state, if it may.
fn may_outlive(state: &Map<String, Value>) -> Option<String> {
    match state.get("Type").and_then(Value::as_str) {
        Some("Pass" | "Wait" | "Choice" | "Succeed" | "Fail") => None,
        Some("Task") => task_may_outlive(state),
        Some("Parallel") => Some("a Parallel, whose branches run side by side".into()),
        Some("Map") => {
            let mode = state
                .get("ItemProcessor")
                .and_then(|processor| processor.pointer("/ProcessorConfig/Mode"));
            Some(if mode.and_then(Value::as_str) == Some("DISTRIBUTED") {
                "a Distributed Map, whose items run side by side as child executions".into()
            } else {
                "a Map, whose items may run side by side".into()
            })
        }
        Some(other) => Some(format!(
            "of Type {}, unknown to sfn-lock wrap",
            json!(other)
        )),
        None => Some("without a Type, unknown to sfn-lock wrap".into()),
    }
}

/// The allow-list of Tasks: a Lambda function ARN used directly, or
/// `arn:PARTITION:states:::lambda:invoke` invoked synchronously.
fn task_may_outlive(state: &Map<String, Value>) -> Option<String> {
    let Some(resource) = state.get("Resource").and_then(Value::as_str) else {
        return Some("a Task without a Resource string".into());
    };
    let parts = arn_parts(resource);
    let partition_is = |service: &str| {
        parts.len() >= 3 && parts[0] == "arn" && is_partition(parts[1]) && parts[2] == service
    };
    // Region, account, name and qualifier may be placeholders (where, not
    // what); the service and the resource type must be written out.
    let function_arn = partition_is("lambda")
        && matches!(parts.len(), 7 | 8)
        && parts[5] == "function"
        && parts[3..].iter().all(|part| !part.is_empty());
    if function_arn {
        return None;
    }
    if partition_is("states") && parts[3..] == ["", "", "lambda", "invoke"] {
        // An asynchronous invoke (InvocationType Event) returns while the
        // function runs on; one chosen at run time may be one.
        return match invocation_type(state) {
            Invocation::AtRunTime => {
                Some("a Lambda invoke whose InvocationType is chosen at run time".into())
            }
            Invocation::Default | Invocation::Written("RequestResponse" | "DryRun") => None,
            Invocation::Written(_) => {
                Some("an asynchronous Lambda invoke, whose function runs on".into())
            }
        };
    }
    let quoted = json!(resource);
    Some(if resource.starts_with("${") {
        format!(
            "a Task on {quoted}, a placeholder that may stand for an activity or a job (for a \
             Lambda function, use arn:aws:states:::lambda:invoke with the placeholder as \
             Parameters.FunctionName)"
        )
    } else if parts.get(5) == Some(&"activity") {
        format!("a Task on the activity {quoted}, whose worker runs on after its state ends")
    } else if resource.contains(".sync") {
        format!("a Task on {quoted}, a job that runs on after its state ends")
    } else if resource.contains(".waitForTaskToken") {
        format!("a Task on {quoted}, a callback whose work runs on after its state ends")
    } else {
        format!("a Task on {quoted}, not a plain Lambda invocation")
    })
}

/// The colon-separated parts of an ARN; a `${...}` placeholder is one
/// opaque piece, because CloudFormation's `${AWS::Partition}` holds colons.
pub(crate) fn arn_parts(arn: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut at) = (0, 0);
    while let Some(rest) = arn.get(at..).filter(|rest| !rest.is_empty()) {
        if rest.starts_with("${") {
            if let Some(close) = rest.find('}') {
                at += close + 1;
                continue;
            }
        }
        if rest.starts_with(':') {
            parts.push(&arn[start..at]);
            start = at + 1;
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    parts.push(&arn[start..]);
    parts
}

/// `aws`, `aws-cn`, `aws-us-gov`, ..., or one placeholder standing for the
/// partition: a substitution there says where the resource is, not what.
pub(crate) fn is_partition(part: &str) -> bool {
    let placeholder =
        part.starts_with("${") && part.ends_with('}') && part.matches('}').count() == 1;
    let named = part
        .split('-')
        .enumerate()
        .all(|(index, piece)| match index {
            0 => piece == "aws",
            _ => {
                !piece.is_empty()
                    && piece
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            }
        });
    placeholder || named
}

#[cfg(test)]
mod tests;
