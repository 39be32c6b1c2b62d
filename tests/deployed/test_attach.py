"""The attach variant (TargetStateMachineArn): a state machine of the user's
own, unchanged, run under the lock by AttachedWorkflowStateMachineArn with
startExecution.sync:2, its output the execution's."""

from __future__ import annotations

import hashlib
import json
import uuid

from lockstate import Lock, poll

LOCK_NAME = "sfn-lock-default"
# ministack 1.5.33 leaves $$.Execution.RedriveCount unset: the child's name
# ends in "-None" where AWS gives "-0" (tests/deployed/README.md).
REDRIVE_COUNTS = ("0", "None")


def test_users_state_machine_runs_under_the_lock(aws, attach_stack, user_resources):
    outputs = attach_stack["outputs"]
    sfn = aws.client("stepfunctions")
    target = user_resources["target"]
    lock = Lock(aws, outputs["LockStoreUrl"], LOCK_NAME)
    assert lock.holders() == []
    given = {"waitSeconds": 2, "batch": "2030-01-01"}
    parent = sfn.start_execution(stateMachineArn=outputs["AttachedWorkflowStateMachineArn"],
                                 name=f"attach-{uuid.uuid4().hex[:8]}", input=json.dumps(given))["executionArn"]

    # The user's machine runs while the parent holds the lock, as a child
    # named after the parent (the sweep finds it by that name).
    def child_running():
        running = [e for e in sfn.list_executions(stateMachineArn=target)["executions"]
                   if e["status"] == "RUNNING"]
        return running and lock.holders() == [parent] and running

    children = poll("the user's state machine runs under the lock", child_running, timeout=60)
    assert len(children) == 1, children
    digest = hashlib.sha256(parent.encode()).hexdigest()
    assert children[0]["name"] in {f"{digest}-{n}" for n in REDRIVE_COUNTS}, children[0]["name"]

    described = poll("the attached execution ends",
                     lambda: (d := sfn.describe_execution(executionArn=parent))["status"] != "RUNNING" and d,
                     timeout=60)
    assert described["status"] == "SUCCEEDED", described
    child = sfn.describe_execution(executionArn=children[0]["executionArn"])
    assert child["status"] == "SUCCEEDED"
    # The child got the input unchanged; the parent's output is the child's.
    assert json.loads(child["input"]) == given
    assert json.loads(described["output"]) == json.loads(child["output"]) == {"etl": "done", "input": given}
    assert lock.holders() == []
