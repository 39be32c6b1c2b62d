"""The deployed skip-if-running state machine (SkipIfRunningStateMachineArn):
a start while the lock is held succeeds at once as skipped and runs nothing.
Started by hand on the default stack, and by the stack's own schedule
(ScheduleExpression) on the scheduled variant (LockStore=ssm), while
`sfn-lock run` holds the lock from a shell."""

from __future__ import annotations

import json
import uuid

import cli
from lockstate import Lock, history, poll, state_events

LOCK_NAME = "sfn-lock-default"


def ended(sfn, arn, timeout=60):
    return poll(f"{arn} ends", lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
                timeout=timeout)


def assert_skipped(sfn, described, holder):
    """SUCCEEDED at once with {skipped, lock: {holder, ...}}, no workload run."""
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["skipped"] is True and output["lock"]["holder"] == holder, output
    assert output["lock"]["lockName"] == LOCK_NAME
    events = history(sfn, described["executionArn"])
    assert state_events(events, "Entered", "Run Workload Under Lock") == [], "a skipped run ran its workload"


def test_second_execution_skips_while_the_first_holds(aws, default_stack):
    outputs = default_stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine = outputs["SkipIfRunningStateMachineArn"]
    lock = Lock(aws, outputs["LockStoreUrl"], LOCK_NAME)
    assert lock.holders() == []
    run = uuid.uuid4().hex[:8]
    # Long enough for the second to start and end while the first holds.
    first_input = {"sleepSeconds": 5, "who": "first"}
    first = sfn.start_execution(stateMachineArn=machine, name=f"first-{run}",
                                input=json.dumps(first_input))["executionArn"]
    poll("the first execution holds the lock", lambda: lock.holders() == [first], timeout=60)

    second = sfn.start_execution(stateMachineArn=machine, name=f"second-{run}",
                                 input=json.dumps({"who": "second"}))["executionArn"]
    assert_skipped(sfn, ended(sfn, second), first)
    assert lock.holders() == [first], "the skipped run changed the lock"

    described = ended(sfn, first)
    assert described["status"] == "SUCCEEDED" and json.loads(described["output"]) == first_input
    assert lock.holders() == []


def the_schedule(aws, stack):
    resources = aws.client("cloudformation").describe_stack_resources(StackName=stack["name"])["StackResources"]
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    return aws.client("scheduler").get_schedule(Name=physical["SkipIfRunningSchedule"],
                                                GroupName=physical["SkipIfRunningScheduleGroup"])


def test_scheduled_start_skips_while_the_cli_holds(aws, scheduled):
    """background.py: the CLI took the lock on the SSM store before the stack
    existed; the schedule fires once, two seconds after the deploy."""
    stack, holder = scheduled["stack"], scheduled["holder"]
    outputs = stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine = outputs["SkipIfRunningStateMachineArn"]
    schedule = the_schedule(aws, stack)
    assert schedule["Target"]["Arn"] == machine
    assert schedule["ScheduleExpression"] == stack["parameters"]["ScheduleExpression"]

    # Only the schedule starts this machine: its one execution is the schedule's.
    started = poll("the schedule starts the skip-if-running state machine",
                   lambda: sfn.list_executions(stateMachineArn=machine)["executions"], timeout=60)
    assert len(started) == 1, started
    described = ended(sfn, started[0]["executionArn"])
    # The schedule's Input, {"scheduledTime": ...}: ministack 1.5.33 leaves
    # <aws.scheduler.scheduled-time> unreplaced (AWS puts the time there).
    assert set(json.loads(described["input"])) == {"scheduledTime"}
    assert_skipped(sfn, described, holder.owner)
    assert cli.status(outputs["LockStoreUrl"], LOCK_NAME)["holders"][0]["owner"] == holder.owner

    status, err = holder.finish()
    assert status == 0, err
    after = cli.status(outputs["LockStoreUrl"], LOCK_NAME)
    assert after["held"] is False and after["holders"] == [], after
    assert after["fencingToken"] == scheduled["token"], "nothing but the CLI took the lock"


def test_the_reconciler_lists_the_ssm_stores_locks(aws, scheduled):
    """The reconciler's input, by Lambda Invoke, on the SSM stack: its listing
    is GetParametersByPath on the store's root path, which AWS authorizes
    against that path's own ARN (".../parameter/sfn-lock/STACK"), not one
    under it; with IAM on, a grant of ".../STACK/*" alone denies every run."""
    outputs = scheduled["stack"]["outputs"]
    answer = aws.client("lambda").invoke(FunctionName=outputs["ReleaseExecutionLocksFunctionArn"],
                                         Payload=json.dumps({"sfnLockReconcile": {}}))
    report = json.loads(answer["Payload"].read())
    assert "FunctionError" not in answer, report
    assert report["failed"] == 0 and report["truncated"] is False, report
