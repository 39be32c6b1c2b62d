"""The deployed queued state machine (QueuedWorkflowStateMachineArn, DynamoDB
only): executions wait in a first-in, first-out queue, not by polling. Its
Acquire Lock is a `.waitForTaskToken` task; a release hands the lock to the
oldest waiter and wakes it with SendTaskSuccess from the binary (or from the
CLI, for a forced release): a round trip through the emulator's Step
Functions API that no other tier makes."""

from __future__ import annotations

import json
import uuid

import cli
from lockstate import Lock, history, poll, state_events

LOCK_NAME = "sfn-lock-default"


def start(sfn, machine, name, given):
    return sfn.start_execution(stateMachineArn=machine, name=f"{name}-{uuid.uuid4().hex[:8]}",
                               input=json.dumps(given))["executionArn"]


def ended(sfn, arn, timeout=120):
    return poll(f"{arn} ends", lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
                timeout=timeout)


def the_grant(events, arn):
    """Acquire Lock's one callback: a single acquire-lock invocation (the
    waiter never polled), completed by SendTaskSuccess with the grant."""
    entered = state_events(events, "Entered", "Acquire Lock")[0]["id"]
    exited = state_events(events, "Exited", "Acquire Lock")[0]["id"]
    inside = [e for e in events if entered < e["id"] < exited]
    assert [e["type"] for e in inside] == ["TaskScheduled", "TaskSucceeded"], [e["type"] for e in inside]
    grant = json.loads(inside[1]["taskSucceededEventDetails"]["output"])
    assert grant["owner"] == arn and grant["outcome"] == "granted", grant
    return grant, inside[1]["timestamp"]


def test_three_executions_queue_and_run_in_turn(aws, default_stack):
    outputs = default_stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine = outputs["QueuedWorkflowStateMachineArn"]
    lock = Lock(aws, outputs["LockStoreUrl"], LOCK_NAME)
    assert lock.holders() == [] and lock.queue_length() == 0
    # The first holds long enough for two more to join the queue behind it.
    inputs = [{"sleepSeconds": 6, "who": "first"}, {"sleepSeconds": 1, "who": "second"},
              {"sleepSeconds": 0, "who": "third"}]
    arns = [start(sfn, machine, "first", inputs[0])]
    poll("the first execution holds the lock", lambda: lock.holders() == arns, timeout=60)

    def queued_behind_the_first(place):
        assert lock.holders() == arns[:1], "the first execution let go before the others queued: lengthen its sleep"
        return lock.queue_length() == place

    for place, given in enumerate(inputs[1:], start=1):
        arns.append(start(sfn, machine, given["who"], given))
        poll(f"the {given['who']} execution queued", lambda place=place: queued_behind_the_first(place), timeout=60)

    done = [ended(sfn, arn) for arn in arns]
    for arn, given, described in zip(arns, inputs, done):
        assert described["status"] == "SUCCEEDED", (arn, described)
        assert json.loads(described["output"]) == given

    # In turn: each waiter was handed the lock after the one before it had
    # entered its release, never before; tokens rise in queue order.
    events = [history(sfn, arn) for arn in arns]
    grants = [the_grant(e, arn) for e, arn in zip(events, arns)]
    for before, after in zip(range(len(arns) - 1), range(1, len(arns))):
        released = state_events(events[before], "Entered", "Release Lock")[0]["timestamp"]
        assert grants[after][1] >= released, f"{arns[after]} was handed the lock before {arns[before]} released"
    tokens = [int(g["fencingToken"]) for g, _ in grants]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3, tokens
    assert lock.holders() == [] and lock.queue_length() == 0


def test_stopped_holder_forced_out_with_the_cli_hands_the_lock_to_the_waiter(aws, default_stack):
    """The runbook (README, "Operating the locks"): stop the holder's
    execution, then free what is left with `sfn-lock release --force`; the
    CLI hands the lock to the queue's next waiter and wakes it itself."""
    outputs = default_stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine, store = outputs["QueuedWorkflowStateMachineArn"], outputs["LockStoreUrl"]
    lock = Lock(aws, store, LOCK_NAME)
    # Its workload outlives the scenario: only the forced release frees the lock.
    holder = start(sfn, machine, "stuck", {"sleepSeconds": 200})
    poll("the stuck execution holds the lock", lambda: lock.holders() == [holder], timeout=60)
    held_token = lock.fencing_token()
    waiter_input = {"sleepSeconds": 0, "who": "waiter"}
    waiter = start(sfn, machine, "waiter", waiter_input)
    poll("the waiter queued", lambda: lock.queue_length() == 1, timeout=60)

    sfn.stop_execution(executionArn=holder, error="Operator.Stopped", cause="stuck")
    assert lock.holders() == [holder], "a stopped execution's lock stays until the sweep or a forced release"
    forced = cli.run(store, "release", "--force", LOCK_NAME)
    assert forced.returncode == 0, forced.stderr
    # The record of who forced what (README): one JSON line on stderr.
    logged = [line for line in cli.stderr_lines(forced) if line.get("event") == "forced_release"]
    assert [(line["lockName"], line["owner"], line["fencingToken"]) for line in logged] \
        == [(LOCK_NAME, holder, held_token)], forced.stderr

    described = ended(sfn, waiter, timeout=60)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == waiter_input
    grant, _ = the_grant(history(sfn, waiter), waiter)
    assert int(grant["fencingToken"]) > held_token
    assert lock.holders() == [] and lock.queue_length() == 0
