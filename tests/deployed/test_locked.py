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


def renew_as_the_workload_would(aws, outputs, lock, owner):
    """README, "Renewal": a workload extends its lease by invoking the
    AcquireLockFunctionArn output with its own lock name and owner; the
    answer is "renewed" with the same fencing token and a later expiry."""
    expiry = lock.expires_at(owner)
    answer = aws.client("lambda").invoke(
        FunctionName=outputs["AcquireLockFunctionArn"],
        Payload=json.dumps({"lockName": DEFAULT_LOCK_NAME, "owner": owner, "leaseSeconds": 7200}))
    assert "FunctionError" not in answer, answer
    renewed = json.loads(answer["Payload"].read())
    assert renewed["outcome"] == "renewed", renewed
    assert renewed["owner"] == owner and int(renewed["fencingToken"]) == lock.fencing_token()
    assert lock.holders() == [owner]
    assert lock.expires_at(owner) > expiry, "the renewal did not extend the lease in the store"


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
    renew_as_the_workload_would(aws, outputs, lock, first)
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


def test_locked_workflow_two_executions_take_turns(aws, default_stack):
    run_two_executions(aws, default_stack)


def test_s3_variant_locked_workflow_two_executions_take_turns(aws, s3_stack):
    run_two_executions(aws, s3_stack)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-v"]))
