"""SampleStateMachines=false (issue 27): the stack without its sample state
machines (locked, queued, skip-if-running, the sample workload function),
with the attach wrapper around a state machine of the user's own. The samples
and everything only they use are absent; the sweep sweeps the wrapper alone;
a stopped wrapper execution's lock is freed by the sweep after its grace; the
wrapper runs the user's machine under the lock.

The stack (conftest.py's `no_samples`) is started before the first test, as
the sweep variant is: a wrapper execution holding the lock, stopped, and a
watch for the sweep freeing it (background.py's helpers), so that the sweep's
delay and grace overlap the other scenarios."""

from __future__ import annotations

import json
import uuid

import background
from lockstate import Lock, poll

STACK = "sfn-lock-no-samples"
# Its own target, not background.user_resources' nightly-etl: test_attach.py
# counts that one's running executions.
TARGET = "nightly-etl-no-samples"
LOCK_NAME = "sfn-lock-default"
PARAMETERS = {"SampleStateMachines": "false", "CleanupDelaySeconds": "20",
              "WorkloadMaxRunSeconds": str(background.SWEEP_GRACE_SECONDS)}
# What SampleStateMachines=false leaves out: resources and outputs.
SAMPLE_RESOURCES = {
    "LockedWorkflowStateMachine", "LockedWorkflowLogGroup", "LockedWorkflowLeftLockToCleanupFilter",
    "QueuedWorkflowStateMachine", "QueuedWorkflowLogGroup", "QueuedWorkflowLeftLockToCleanupFilter",
    "SkipIfRunningStateMachine", "SkipIfRunningLogGroup", "SkipIfRunningLeftLockToCleanupFilter",
    "SampleWorkloadFunction", "SampleWorkloadLogGroup",
}
SAMPLE_OUTPUTS = {"LockedWorkflowStateMachineArn", "QueuedWorkflowStateMachineArn",
                  "SkipIfRunningStateMachineArn", "WorkloadFunctionArn"}


def start(aws, deploy_stack) -> dict:
    """The user's state machine, the stack around it without samples, and a
    wrapper execution holding the lock, stopped (its child runs on)."""
    definition = {"StartAt": "Work", "States": {
        "Work": {"Type": "Wait", "SecondsPath": "$.waitSeconds", "Next": "Done"},
        "Done": {"Type": "Pass", "Parameters": {"etl": "done", "input.$": "$"}, "End": True}}}
    target = aws.client("stepfunctions").create_state_machine(
        name=TARGET, roleArn=background._role(aws.client("iam"), f"{TARGET}-role"),
        definition=json.dumps(definition))["stateMachineArn"]
    stack = deploy_stack({**PARAMETERS, "TargetStateMachineArn": target})
    outputs = stack["outputs"]
    stopped = background._hold_and_stop(aws, outputs["AttachedWorkflowStateMachineArn"], outputs["LockStoreUrl"],
                                        LOCK_NAME, {"waitSeconds": background.WORKLOAD_SECONDS})
    return {"stack": stack, "target": target, "stopped": stopped}


def test_samples_and_what_only_they_use_are_absent(aws, no_samples):
    stack = no_samples["stack"]
    outputs = stack["outputs"]
    assert not SAMPLE_OUTPUTS & set(outputs), SAMPLE_OUTPUTS & set(outputs)
    assert {"AttachedWorkflowStateMachineArn", "LockStoreUrl", "AcquireLockFunctionArn",
            "ReleaseExecutionLocksFunctionArn"} <= set(outputs)
    resources = {r["LogicalResourceId"]: r for r in
                 aws.client("cloudformation").describe_stack_resources(StackName=STACK)["StackResources"]}
    assert not SAMPLE_RESOURCES & set(resources), SAMPLE_RESOURCES & set(resources)
    assert {"AttachedWorkflowStateMachine", "ReleaseExecutionLocksFunction", "ExecutionEndedRule"} <= set(resources)
    machines = {resources[name]["PhysicalResourceId"] for name, r in resources.items()
                if r["ResourceType"] == "AWS::StepFunctions::StateMachine"}
    assert machines == {outputs["AttachedWorkflowStateMachineArn"]}, machines
    # The sweep sweeps the wrapper alone (the empty entry before it skipped),
    # and the rule sends the wrapper's ends.
    env = aws.client("lambda").get_function_configuration(
        FunctionName=outputs["ReleaseExecutionLocksFunctionArn"])["Environment"]["Variables"]
    swept = [arn for arn in env["SWEPT_STATE_MACHINE_ARNS"].split(",") if arn.strip()]
    assert swept == [outputs["AttachedWorkflowStateMachineArn"]], env["SWEPT_STATE_MACHINE_ARNS"]
    rule = aws.client("events").describe_rule(Name=resources["ExecutionEndedRule"]["PhysicalResourceId"])
    assert outputs["AttachedWorkflowStateMachineArn"] in json.loads(rule["EventPattern"])["detail"]["stateMachineArn"]


def test_stopped_wrapper_execution_lock_freed_by_the_sweep_after_its_grace(no_samples):
    stopped = no_samples["stopped"]
    assert stopped["status"] == "ABORTED", stopped["status"]
    freed_at = stopped["watch"].seen()
    background.NOTES.append(f"no samples: the wrapper's lock freed by the sweep "
                            f"{freed_at - stopped['stopped_at']:.1f} s after the stop")
    assert freed_at - stopped["stopped_at"] >= background.SWEEP_GRACE_SECONDS - 1, \
        f"freed {freed_at - stopped['stopped_at']:.1f} s after the stop, inside the grace"


def test_wrapper_runs_the_users_machine_under_the_lock(aws, no_samples):
    no_samples["stopped"]["watch"].seen()  # the stopped execution's lock is free first
    outputs = no_samples["stack"]["outputs"]
    sfn = aws.client("stepfunctions")
    lock = Lock(aws, outputs["LockStoreUrl"], LOCK_NAME)
    given = {"waitSeconds": 2}
    parent = sfn.start_execution(stateMachineArn=outputs["AttachedWorkflowStateMachineArn"],
                                 name=f"attach-{uuid.uuid4().hex[:8]}", input=json.dumps(given))["executionArn"]
    poll("the wrapper holds the lock", lambda: lock.holders() == [parent], timeout=60)
    described = poll("the wrapper's execution ends",
                     lambda: (d := sfn.describe_execution(executionArn=parent))["status"] != "RUNNING" and d,
                     timeout=60)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"etl": "done", "input": given}
    assert lock.holders() == []
