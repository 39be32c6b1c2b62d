"""The deployed locked state machine (LockedWorkflowStateMachineArn), driven
through the Step Functions API as a user would: two executions of one lock,
one holds while the other waits, both succeed in turn, the lock is free at
the end. Once on the default stack (DynamoDB) and once on LockStore=s3."""

from __future__ import annotations

import json
import uuid

import pytest

from lockstate import Lock, history, poll, state_events, task_errors

DEFAULT_LOCK_NAME = "sfn-lock-default"
# Long enough that the second execution's first acquire surely meets the
# first one's hold; the hold ends by itself (the sample workload's sleep).
HOLD_SECONDS = 6


def describe(sfn, arn):
    return sfn.describe_execution(executionArn=arn)


def granted_token(events, execution_arn) -> int:
    """The fencing token of the acquire that let the execution through: the
    answer of the last acquire-lock call before Acquire Lock was left."""
    exited = state_events(events, "Exited", "Acquire Lock")
    assert len(exited) == 1, exited
    answers = [e for e in events if e["type"] == "TaskSucceeded" and e["id"] < exited[0]["id"]]
    payload = json.loads(answers[-1]["taskSucceededEventDetails"]["output"])["Payload"]
    assert payload["owner"] == execution_arn, payload
    return int(payload["fencingToken"])


def run_two_executions(aws, stack):
    outputs = stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine = outputs["LockedWorkflowStateMachineArn"]
    lock = Lock(aws, outputs["LockStoreUrl"], DEFAULT_LOCK_NAME)
    assert lock.holders() == [], "the lock is held before the scenario"
    token_before = lock.fencing_token()
    run = uuid.uuid4().hex[:8]

    first_input = {"sleepSeconds": HOLD_SECONDS, "who": "first"}
    first = sfn.start_execution(stateMachineArn=machine, name=f"first-{run}",
                                input=json.dumps(first_input))["executionArn"]
    poll("the first execution holds the lock", lambda: lock.holders() == [first] or None, timeout=60)

    second_input = {"sleepSeconds": 0, "who": "second"}
    second = sfn.start_execution(stateMachineArn=machine, name=f"second-{run}",
                                 input=json.dumps(second_input))["executionArn"]
    # The second execution is refused the lock (LockUnavailable, retried)
    # while the first one holds it, and is not a holder meanwhile.
    def second_refused():
        if "LockUnavailable" in task_errors(history(sfn, second)):
            return True
        status = describe(sfn, second)["status"]
        assert status == "RUNNING", f"the second execution ended ({status}) without waiting for the lock"
        return False

    poll("the second execution's acquire refused with LockUnavailable", second_refused, timeout=60)
    assert lock.holders() == [first], "the lock changed hands while the first execution held it"
    assert describe(sfn, first)["status"] == "RUNNING", \
        "the first execution ended before the second one was seen waiting: lengthen HOLD_SECONDS"

    ended = {}
    for arn in (first, second):
        ended[arn] = poll(f"{arn} ends", lambda arn=arn: (d := describe(sfn, arn))["status"] != "RUNNING" and d,
                          timeout=120)
    for arn, given in ((first, first_input), (second, second_input)):
        assert ended[arn]["status"] == "SUCCEEDED", (arn, ended[arn])
        # Transparent: the execution's output is the workload's, its input unchanged.
        assert json.loads(ended[arn]["output"]) == given

    # The workloads never overlapped: the second one's workload began after
    # the first one had released the lock. (The Parallel around the workload:
    # ministack 1.5.33 writes no events for the states inside a branch.)
    first_events, second_events = history(sfn, first), history(sfn, second)
    first_released = state_events(first_events, "Exited", "Release Lock")
    second_workload = state_events(second_events, "Entered", "Run Workload Under Lock")
    assert len(first_released) == 1 and len(second_workload) == 1, (first_released, second_workload)
    assert second_workload[0]["timestamp"] >= first_released[0]["timestamp"]
    assert "LockUnavailable" not in task_errors(first_events)

    # Free at the end; each execution granted its own fencing token, rising in
    # grant order, and the record keeps the last one granted.
    assert lock.holders() == []
    first_token, second_token = granted_token(first_events, first), granted_token(second_events, second)
    assert token_before < first_token < second_token == lock.fencing_token()
    return first, second


def test_default_stack_every_resource_created(aws, default_stack):
    resources = aws.client("cloudformation").describe_stack_resources(
        StackName=default_stack["name"])["StackResources"]
    types = {r["ResourceType"] for r in resources}
    assert {r["ResourceStatus"] for r in resources} == {"CREATE_COMPLETE"}
    # What the SAM transform made of the template: versions and aliases, the
    # rule, queues and mapping of the sweep chain, the state machines.
    for expected in ("AWS::DynamoDB::Table", "AWS::Lambda::Function", "AWS::Lambda::Version",
                     "AWS::Lambda::Alias", "AWS::Lambda::EventSourceMapping", "AWS::Events::Rule",
                     "AWS::SQS::Queue", "AWS::SQS::QueuePolicy", "AWS::StepFunctions::StateMachine",
                     "AWS::IAM::Role", "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard"):
        assert expected in types, expected
    assert not any(t.startswith("AWS::Serverless::") for t in types)


def test_default_stack_outputs_name_what_was_deployed(aws, default_stack):
    outputs = default_stack["outputs"]
    assert outputs["LockStoreUrl"] == f"dynamodb://{outputs['LockTableName']}"
    sfn = aws.client("stepfunctions")
    for key in ("LockedWorkflowStateMachineArn", "QueuedWorkflowStateMachineArn", "SkipIfRunningStateMachineArn"):
        assert sfn.describe_state_machine(stateMachineArn=outputs[key])["status"] == "ACTIVE", key
    assert "AttachedWorkflowStateMachineArn" not in outputs  # no TargetStateMachineArn given
    table = aws.client("dynamodb").describe_table(TableName=outputs["LockTableName"])["Table"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["lockName"]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["owner-index"]


def test_locked_workflow_two_executions_take_turns(aws, default_stack):
    run_two_executions(aws, default_stack)


def test_s3_variant_outputs(aws, s3_stack):
    outputs = s3_stack["outputs"]
    assert outputs["LockStoreUrl"] == f"s3://{outputs['LockBucketName']}/locks/"
    # The S3 store keeps no queue: the queued state machine is not deployed.
    assert "QueuedWorkflowStateMachineArn" not in outputs
    assert "LockTableName" not in outputs


def test_s3_variant_locked_workflow_two_executions_take_turns(aws, s3_stack):
    run_two_executions(aws, s3_stack)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-v"]))
