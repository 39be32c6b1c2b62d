//! Tasks that start work and return without waiting for it (an
//! asynchronous Lambda invoke, a job started without `.sync`, an AWS SDK
//! `start...`/`run...`/`submit...`/`create...Job` action): on success the
//! lock would be released while that work runs, so they are refused, or
//! wrapped with one warning each under --allow-unsafe-error-handling.

use serde_json::{json, Value};

use super::{assert_refused, stdout_json, warnings, wrap_edited};

/// The sample's "Run Workload" with `resource` and `parameters`.
fn run_workload(resource: &str, parameters: Value) -> impl FnOnce(&mut Value) {
    let resource = resource.to_owned();
    move |definition| {
        let task = &mut definition["States"]["Run Workload"];
        task["Resource"] = json!(resource);
        task["Parameters"] = parameters;
        task["Retry"] = json!([]);
    }
}

/// Each shape that starts work and returns at once, and what the refusal says of it.
fn unwaited() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "arn:aws:states:::lambda:invoke",
            json!({"FunctionName": "f", "InvocationType": "Event"}),
            "an asynchronous Lambda invoke",
        ),
        (
            "arn:aws:states:::lambda:invoke",
            json!({"FunctionName": "f", "InvocationType.$": "$.how"}),
            "InvocationType is chosen at run time",
        ),
        (
            "arn:aws:states:::aws-sdk:lambda:invoke",
            json!({"FunctionName": "f", "InvocationType": "Event"}),
            "an asynchronous Lambda invoke",
        ),
        (
            "arn:aws:states:::states:startExecution",
            json!({"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"}),
            "without .sync",
        ),
        (
            "arn:aws:states:::ecs:runTask",
            json!({"Cluster": "c", "TaskDefinition": "t"}),
            "without .sync",
        ),
        (
            "arn:aws-cn:states:::batch:submitJob",
            json!({"JobName": "j", "JobQueue": "q", "JobDefinition": "d"}),
            "without .sync",
        ),
        (
            "arn:aws:states:::glue:startJobRun",
            json!({"JobName": "j"}),
            "without .sync",
        ),
        (
            "arn:aws:states:::aws-sdk:ecs:runTask",
            json!({"Cluster": "c", "TaskDefinition": "t"}),
            "AWS SDK integrations have no .sync",
        ),
        (
            "arn:aws:states:::aws-sdk:sfn:startExecution",
            json!({"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"}),
            "AWS SDK integrations have no .sync",
        ),
        (
            "arn:aws:states:::aws-sdk:sagemaker:createTrainingJob",
            json!({"TrainingJobName": "t"}),
            "AWS SDK integrations have no .sync",
        ),
        (
            "arn:aws:states:::aws-sdk:batch:submitJob",
            json!({"JobName": "j"}),
            "AWS SDK integrations have no .sync",
        ),
    ]
}

#[test]
fn a_task_that_does_not_wait_for_its_work_is_refused() {
    for (resource, parameters, why) in unwaited() {
        let out = wrap_edited(run_workload(resource, parameters.clone()), &[]);
        assert_refused(&out, 1, "state \"Run Workload\"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for expected in [
            why,
            "the lock would be released while that work runs",
            "--allow-unsafe-error-handling",
        ] {
            assert!(
                stderr.contains(expected),
                "{resource} {parameters}: {expected:?} in {stderr}"
            );
        }
        // The remedy names the waiting form.
        assert!(
            stderr.contains(".sync") || stderr.contains("RequestResponse"),
            "{resource}: {stderr}"
        );
    }
    // Nested too: in a Map's item processor.
    let out = wrap_edited(
        |definition| {
            definition["States"]["Summarize"] = json!({
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Start Child",
                    "States": {"Start Child": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::states:startExecution",
                        "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"},
                        "End": true
                    }}
                },
                "Next": "Done"
            });
        },
        &[],
    );
    assert_refused(&out, 1, "state \"Start Child\"");
}

#[test]
fn allow_unsafe_error_handling_wraps_it_with_a_warning() {
    let out = wrap_edited(
        run_workload(
            "arn:aws:states:::ecs:runTask",
            json!({"Cluster": "c", "TaskDefinition": "t"}),
        ),
        &["--allow-unsafe-error-handling"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let wrapped: Value = serde_json::from_slice(&out.stdout).expect("the output is JSON");
    assert_eq!(
        wrapped["States"]["Run Workload Under Lock"]["Branches"][0]["States"]["Run Workload"]
            ["Resource"],
        json!("arn:aws:states:::ecs:runTask"),
        "wrapped as written"
    );
    let warnings = warnings(&out);
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("state \"Run Workload\"")
            && warnings[0].contains("the lock would be released while that work runs")
            && warnings[0].ends_with("(wrapped anyway: --allow-unsafe-error-handling)"),
        "{stderr}"
    );
}

#[test]
fn tasks_that_wait_for_their_work_still_wrap() {
    for (resource, parameters) in [
        (
            "arn:aws:states:::lambda:invoke",
            json!({"FunctionName": "f"}),
        ),
        (
            "arn:aws:states:::lambda:invoke",
            json!({"FunctionName": "f", "InvocationType": "RequestResponse"}),
        ),
        (
            "arn:aws:states:::aws-sdk:lambda:invoke",
            json!({"FunctionName": "f"}),
        ),
        (
            "arn:aws:states:::dynamodb:putItem",
            json!({"TableName": "t", "Item": {}}),
        ),
        (
            "arn:aws:states:::aws-sdk:dynamodb:putItem",
            json!({"TableName": "t", "Item": {}}),
        ),
        (
            "arn:aws:states:::ecs:runTask.sync",
            json!({"Cluster": "c", "TaskDefinition": "t"}),
        ),
        (
            "arn:aws:states:::states:startExecution.sync:2",
            json!({"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"}),
        ),
        (
            "arn:aws:states:::states:startExecution.waitForTaskToken",
            json!({"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"}),
        ),
        (
            "arn:aws:states:::aws-sdk:sfn:startSyncExecution",
            json!({"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:express"}),
        ),
    ] {
        stdout_json(&wrap_edited(run_workload(resource, parameters), &[]));
    }
}
