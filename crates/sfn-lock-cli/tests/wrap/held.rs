//! Which errors out of the user's states hold the lock: every one when any
//! state, at any depth, may run work side by side or outlive its state; for
//! sequential plain Lambda invocations, only those after which the
//! invocation may still run, the others releasing at once.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::{stdout_json, wrap_edited};

const WAIT: &str = "Wait For Workload To Stop";

/// The errors after which a Lambda invocation may still run, as the
/// reviewed file's sample Task names them.
const MAY_STILL_RUN: [&str; 6] = [
    "States.Timeout",
    "States.HeartbeatTimeout",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.SdkClientException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
];

/// The sample with its "Summarize" state replaced by `state` (going on to
/// "Done"), wrapped: the output, and the stderr it came with.
fn wrapped_with(mut state: Value, args: &[&str]) -> (Value, String) {
    if let Some(fields) = state.as_object_mut() {
        fields.remove("End");
        fields.insert("Next".into(), json!("Done"));
    }
    let out = wrap_edited(|definition| definition["States"]["Summarize"] = state, args);
    let wrapped = stdout_json(&out);
    (wrapped, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The Parallel's Catch, after checking that it goes on to Release Lock and
/// that every state of the output is reachable (ASL refuses the others).
fn workload_catch(wrapped: &Value) -> &Value {
    let workload = &wrapped["States"]["Run Workload Under Lock"];
    assert_eq!(workload["Next"], json!("Release Lock"));
    let states = wrapped["States"].as_object().expect("States");
    let mut seen = BTreeSet::new();
    let mut next = vec![wrapped["StartAt"].as_str().expect("StartAt").to_owned()];
    while let Some(name) = next.pop() {
        let state = &states[&name];
        if !seen.insert(name) {
            continue;
        }
        for rule in ["Choices", "Catch"].map(|field| &state[field]) {
            let rules = rule.as_array().into_iter().flatten();
            next.extend(rules.filter_map(|rule| rule["Next"].as_str().map(String::from)));
        }
        for field in ["Next", "Default"] {
            next.extend(state[field].as_str().map(String::from));
        }
    }
    let all: BTreeSet<String> = states.keys().cloned().collect();
    assert_eq!(seen, all, "every state is reachable");
    &workload["Catch"]
}

/// Every error out of the user's states holds, and stderr says which state
/// made it so.
fn assert_all_held(state: Value, why: &str) {
    let (wrapped, stderr) = wrapped_with(state, &[]);
    assert_eq!(
        workload_catch(&wrapped),
        &json!([{"ErrorEquals": ["States.ALL"], "Next": WAIT}]),
        "{why}"
    );
    let said = format!("because state \"Summarize\" is {why}");
    assert!(stderr.contains(&said), "{said:?} in {stderr}");
    let comment = wrapped["Comment"].as_str().expect("a Comment");
    assert!(comment.contains(&said), "{said:?} in {comment}");
}

fn lambda_task(resource: &str) -> Value {
    json!({
        "Type": "Task",
        "Resource": resource,
        "Parameters": {"FunctionName": "${ShipFunctionArn}", "Payload.$": "$"},
        "TimeoutSeconds": 5,
        "End": true
    })
}

#[test]
fn a_distributed_map_tolerating_no_failure_holds_on_every_error() {
    // Its Catch sees States.ExceedToleratedFailureThreshold, whatever the
    // item's error, while the other items' child executions run on.
    assert_all_held(
        json!({
            "Type": "Map",
            "ItemsPath": "$.items",
            "ToleratedFailurePercentage": 0,
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                "StartAt": "Ship",
                "States": {"Ship": lambda_task("arn:aws:states:::lambda:invoke")}
            },
            "Next": "Done"
        }),
        "a Distributed Map",
    );
}

#[test]
fn an_inline_map_in_a_parallel_behind_a_choice_holds_on_every_error() {
    // Reached only from a Choice rule: what matters is what may run.
    let inline_map = json!({
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "Ship",
            "States": {"Ship": lambda_task("arn:aws:states:::lambda:invoke")}
        },
        "End": true
    });
    let out = wrap_edited(
        |definition| {
            definition["States"]["Check Status"]["Choices"][0]["Next"] = json!("Fan Out");
            definition["States"]["Fan Out"] = json!({
                "Type": "Parallel",
                "Branches": [{"StartAt": "Ship All", "States": {"Ship All": inline_map}}],
                "Next": "Done"
            });
            definition["States"]
                .as_object_mut()
                .map(|states| states.remove("Reject Order"));
        },
        &[],
    );
    let wrapped = stdout_json(&out);
    assert_eq!(
        workload_catch(&wrapped),
        &json!([{"ErrorEquals": ["States.ALL"], "Next": WAIT}])
    );
    // By name, depth first: the Parallel before the Map inside it.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("because state \"Fan Out\" is a Parallel, whose branches run side by side (and 1 more such state)"),
        "{stderr}"
    );
}

#[test]
fn an_activity_a_sync_job_and_a_callback_hold_on_every_error() {
    let activity = "arn:aws:states:us-east-1:123456789012:activity:ship";
    assert_all_held(
        json!({"Type": "Task", "Resource": activity, "TimeoutSeconds": 5, "End": true}),
        "a Task on the activity",
    );
    for sync in [
        "arn:aws:states:::ecs:runTask.sync",
        "arn:aws:states:::states:startExecution.sync:2",
    ] {
        assert_all_held(lambda_task(sync), "a Task on");
        let (_, stderr) = wrapped_with(lambda_task(sync), &[]);
        assert!(
            stderr.contains("a job that runs on after its state ends"),
            "{stderr}"
        );
    }
    let callback = "arn:aws:states:::lambda:invoke.waitForTaskToken";
    assert_all_held(lambda_task(callback), "a Task on");
    let (_, stderr) = wrapped_with(lambda_task(callback), &[]);
    assert!(stderr.contains("a callback whose work runs on"), "{stderr}");
    // A Resource wrap cannot read may be any of these.
    assert_all_held(
        lambda_task("${ShipResource}"),
        "a Task on \"${ShipResource}\"",
    );
    // An invoke that does not wait for the function is refused
    // (wrap/unwaited.rs), or, wrapped anyway, holds on every error.
    let mut event = lambda_task("arn:aws:states:::lambda:invoke");
    event["Parameters"]["InvocationType"] = json!("Event");
    event["Next"] = json!("Done");
    event.as_object_mut().map(|fields| fields.remove("End"));
    let out = wrap_edited(
        |definition| definition["States"]["Summarize"] = event,
        &["--allow-unsafe-error-handling"],
    );
    assert_eq!(out.status.code(), Some(0));
    let wrapped: Value = serde_json::from_slice(&out.stdout).expect("the output is JSON");
    assert_eq!(
        workload_catch(&wrapped),
        &json!([{"ErrorEquals": ["States.ALL"], "Next": WAIT}])
    );
}

#[test]
fn plain_lambda_invocations_release_at_once_after_an_ended_invocation() {
    for resource in [
        "arn:aws:states:::lambda:invoke",
        "arn:aws:lambda:us-east-1:123456789012:function:ship",
        "arn:aws-cn:lambda:cn-north-1:123456789012:function:ship:live",
        "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${Ship}",
    ] {
        let (wrapped, stderr) = wrapped_with(lambda_task(resource), &[]);
        // Timeouts and Lambda service errors first: catchers are tried in order.
        assert_eq!(
            workload_catch(&wrapped),
            &json!([
                {"ErrorEquals": MAY_STILL_RUN, "Next": WAIT},
                {"ErrorEquals": ["States.ALL"], "Next": "Release Lock After Failure"}
            ]),
            "{resource}"
        );
        assert!(
            stderr.contains("Your states run one Lambda invocation at a time"),
            "{resource}: {stderr}"
        );
    }
}
