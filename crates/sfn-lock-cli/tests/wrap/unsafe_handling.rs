//! The user's Retry and Catch on errors after which work may still run (on
//! a Map, a Parallel, a job, a callback or an activity, any error), and
//! Maps that tolerate failed items: refused, or wrapped with one warning
//! each under --allow-unsafe-error-handling.

use serde_json::{json, Value};

use super::{assert_refused, stdout_json, warnings, wrap_edited};

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

/// A Parallel of two workload calls, with `field` on one error of the user's own.
fn parallel_handling(definition: &mut Value, field: &str) {
    let call = |next: &str| {
        json!({
            "StartAt": next,
            "States": {next: {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": "${ShipFunctionArn}", "Payload.$": "$"},
                "TimeoutSeconds": 5,
                "End": true
            }}
        })
    };
    let mut parallel = json!({
        "Type": "Parallel",
        "Branches": [call("Ship A"), call("Ship B")],
        "Next": "Done"
    });
    parallel[field] = match field {
        "Catch" => json!([{"ErrorEquals": ["OrderRejected"], "Next": "Done"}]),
        _ => json!([{"ErrorEquals": ["OrderRejected"], "MaxAttempts": 2}]),
    };
    definition["States"]["Summarize"] = parallel;
}

#[test]
fn any_error_handled_on_a_map_or_parallel_is_refused() {
    // Whatever the error, the other branches' invocations run on after one
    // failed: a Catch would let the states end (and the lock go) while they
    // run, a Retry would start them a second time beside the first.
    for field in ["Catch", "Retry"] {
        let out = wrap_edited(|definition| parallel_handling(definition, field), &[]);
        assert_refused(
            &out,
            1,
            &format!("state \"Summarize\" has a {field} on OrderRejected"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("a Map or Parallel"), "{stderr}");
    }
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
    assert_eq!(warnings(&out).len(), 3, "{stderr}");
    assert_eq!(stderr.lines().count(), 3 + 3, "three notes too: {stderr}");
    for expected in [
        "state \"Run Workload\" has a Retry on Lambda.ServiceException",
        "state \"Run Workload\" has a Catch on States.ALL",
        "state \"Ship Item\" has a Retry on States.Timeout",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in: {stderr}");
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
    let warnings = warnings(&out);
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("state \"Summarize\" has ToleratedFailureCount 2"),
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

/// The sample's "Run Workload" on `resource`, with `field` on `error`.
fn waiting_task_with(
    resource: &'static str,
    field: &'static str,
    error: &'static str,
) -> impl FnOnce(&mut Value) {
    move |definition| {
        let task = &mut definition["States"]["Run Workload"];
        task["Resource"] = json!(resource);
        task["Parameters"] = json!({"Cluster": "c", "TaskDefinition": "t"});
        task.as_object_mut().map(|fields| fields.remove("Retry"));
        task[field] = match field {
            "Catch" => json!([{"ErrorEquals": [error], "Next": "Reject Order"}]),
            _ => json!([{"ErrorEquals": [error], "MaxAttempts": 2}]),
        };
    }
}

#[test]
fn any_error_handled_on_a_job_a_callback_or_an_activity_is_refused() {
    // A service error of a .sync Task may come from the start (nothing
    // runs) or from the polling (the job runs on): the names are the same.
    for (resource, error) in [
        (
            "arn:aws:states:::ecs:runTask.sync",
            "ECS.AmazonECSException",
        ),
        (
            "arn:aws:states:::batch:submitJob.sync",
            "Batch.BatchException",
        ),
        (
            "arn:aws:states:::states:startExecution.sync:2",
            "StepFunctions.ExecutionLimitExceededException",
        ),
        (
            "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
            "Order.Rejected",
        ),
        (
            "arn:aws:states:us-east-1:123456789012:activity:ship",
            "Order.Rejected",
        ),
    ] {
        for field in ["Catch", "Retry"] {
            let out = wrap_edited(waiting_task_with(resource, field, error), &[]);
            assert_refused(
                &out,
                1,
                &format!("state \"Run Workload\" has a {field} on {error}"),
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            for expected in [
                "let the lock's own states handle",
                "--allow-unsafe-error-handling",
            ] {
                assert!(
                    stderr.contains(expected),
                    "{resource}: {expected:?} in {stderr}"
                );
            }
        }
    }
    // A retrier that never retries passes.
    let out = wrap_edited(
        |definition| {
            waiting_task_with(
                "arn:aws:states:::ecs:runTask.sync",
                "Retry",
                "ECS.AmazonECSException",
            )(definition);
            definition["States"]["Run Workload"]["Retry"][0]["MaxAttempts"] = json!(0);
        },
        &[],
    );
    stdout_json(&out);
}
