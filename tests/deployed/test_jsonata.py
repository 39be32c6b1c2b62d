"""The JSONata flavour (statemachine/jsonata/*.asl.json) run on the default
stack (DynamoDB) beside the JSONPath machines the template deployed, each
created with the values the template gave its JSONPath twin
(jsonata_machines.py): contention across the flavours on one lock, the queue,
skip-if-running, a workload that fails, one that times out, and
PassLockToWorkload, with the outcomes of both flavours compared. The attach
wrapper and the S3 store: test_jsonata_variants.py.

ministack runs JSONata but for a Parallel state's Arguments/Output/Assign,
which ministack_jsonata.py adds (started with SFN_LOCK_DEPLOYED_AUTH=true, as
`make deployed-test` does); without it the locked outputs come back as
[output] and these tests fail (tests/deployed/README.md, "JSONata")."""

from __future__ import annotations

import json

import pytest

from jsonata_machines import both_flavours, ended, flavoured, run_both, start
from lockstate import Lock, history, poll, state_events, task_errors
from test_locked import granted_token
from test_queued import the_grant

OUTPUTS = {"locked-workflow": "LockedWorkflowStateMachineArn", "queued-workflow": "QueuedWorkflowStateMachineArn",
           "skip-if-running": "SkipIfRunningStateMachineArn"}
LOCK_NAME = "sfn-lock-default"


@pytest.fixture(scope="session")
def deployed(aws, default_stack):
    """{kind: (JSONPath machine ARN, values, role, JSONata machine ARN)} on the default stack."""
    sfn = aws.client("stepfunctions")
    machines = {}
    for kind, output in OUTPUTS.items():
        arn = default_stack["outputs"][output]
        machines[kind] = (arn, *flavoured(sfn, arn, kind))
    return machines


def flavours_of(aws, deployed, kind, label, **changes):
    _, values, role, _ = deployed[kind]
    return both_flavours(aws.client("stepfunctions"), values, role, kind, label, **changes)


def test_the_jsonata_machines_take_the_template_values(deployed):
    """What the comparison rests on: the values read back are the template's."""
    _, values, _, _ = deployed["locked-workflow"]
    assert values["LockName"] == LOCK_NAME and values["LockResultPath"] == "null"
    assert int(values["WorkloadTimeoutSeconds"]) == 300 and int(values["WorkloadMaxRunSeconds"]) == 900
    assert ":function:" in values["AcquireLockFunctionArn"] and values["Partition"] == "aws"


def test_jsonata_and_jsonpath_executions_take_turns_on_one_lock(aws, default_stack, deployed):
    jsonpath, _, _, jsonata = deployed["locked-workflow"]
    take_turns(aws, default_stack["outputs"]["LockStoreUrl"], jsonpath, jsonata)


def take_turns(aws, store_url, jsonpath, jsonata):
    """Contention: a JSONata execution holds; a second JSONata one and a JSONPath
    one wait (LockUnavailable, retried) and run after it, never beside it."""
    sfn = aws.client("stepfunctions")
    lock = Lock(aws, store_url, LOCK_NAME)
    assert lock.holders() == []
    token_before = lock.fencing_token()
    inputs = [{"sleepSeconds": 6, "who": "first"}, {"sleepSeconds": 0, "who": "second"}, {"who": "third", "n": [1]}]
    first = start(sfn, jsonata, "first", inputs[0])
    poll("the first (JSONata) execution holds", lambda: lock.holders() == [first], timeout=60)
    others = [start(sfn, jsonata, "second", inputs[1]), start(sfn, jsonpath, "third", inputs[2])]
    for arn in others:
        poll(f"{arn} refused with LockUnavailable", lambda arn=arn: "LockUnavailable" in task_errors(history(sfn, arn)),
             timeout=60)
    assert lock.holders() == [first], "the first execution let go before the others waited: lengthen its sleep"

    arns = [first, *others]
    for arn, given in zip(arns, inputs):
        described = ended(sfn, arn)
        assert described["status"] == "SUCCEEDED", described
        assert json.loads(described["output"]) == given, "not transparent: the output is not the workload's"
    events = {arn: history(sfn, arn) for arn in arns}
    spans = sorted((state_events(events[a], "Entered", "Run Workload Under Lock")[0]["timestamp"],
                    state_events(events[a], "Exited", "Release Lock")[0]["timestamp"]) for a in arns)
    for (_, released), (entered, _) in zip(spans, spans[1:]):
        assert entered >= released, f"two workloads overlapped: {spans}"
    tokens = [granted_token(events[a], a) for a in arns]
    assert token_before < tokens[0] < min(tokens[1:]) and len(set(tokens)) == 3, tokens
    assert lock.holders() == [] and max(tokens) == lock.fencing_token()


def test_jsonata_queued_waiter_is_handed_the_lock(aws, default_stack, deployed):
    """The queue: a callback acquire with $states.context.Task.Token, woken by
    the release's SendTaskSuccess after one acquire-lock call."""
    sfn = aws.client("stepfunctions")
    _, _, _, machine = deployed["queued-workflow"]
    lock = Lock(aws, default_stack["outputs"]["LockStoreUrl"], LOCK_NAME)
    assert lock.holders() == [] and lock.queue_length() == 0
    inputs = [{"sleepSeconds": 5, "who": "first"}, {"sleepSeconds": 0, "who": "second"}]
    first = start(sfn, machine, "first", inputs[0])
    poll("the first execution holds", lambda: lock.holders() == [first], timeout=60)
    second = start(sfn, machine, "second", inputs[1])
    poll("the second execution queued", lambda: lock.queue_length() == 1, timeout=60)
    assert lock.holders() == [first], "the first let go before the second queued: lengthen its sleep"
    for arn, given in ((first, inputs[0]), (second, inputs[1])):
        described = ended(sfn, arn)
        assert described["status"] == "SUCCEEDED" and json.loads(described["output"]) == given, described
    grants = [the_grant(history(sfn, arn), arn) for arn in (first, second)]
    released = state_events(history(sfn, first), "Entered", "Release Lock")[0]["timestamp"]
    assert grants[1][1] >= released, "the waiter was handed the lock before the holder released"
    assert int(grants[0][0]["fencingToken"]) < int(grants[1][0]["fencingToken"])
    assert lock.holders() == [] and lock.queue_length() == 0


def test_jsonata_skip_if_running_skips_as_the_jsonpath_one_does(aws, default_stack, deployed):
    sfn = aws.client("stepfunctions")
    _, _, _, locked = deployed["locked-workflow"]
    jsonpath_skip, _, _, jsonata_skip = deployed["skip-if-running"]
    lock = Lock(aws, default_stack["outputs"]["LockStoreUrl"], LOCK_NAME)
    assert lock.holders() == []
    holder = start(sfn, locked, "holder", {"sleepSeconds": 5})
    poll("the holder holds", lambda: lock.holders() == [holder], timeout=60)
    outputs = {}
    for flavour, machine in (("jsonpath", jsonpath_skip), ("jsonata", jsonata_skip)):
        described = ended(sfn, start(sfn, machine, f"skip-{flavour}", {"who": flavour}), timeout=60)
        assert described["status"] == "SUCCEEDED", described
        outputs[flavour] = json.loads(described["output"])
        assert state_events(history(sfn, described["executionArn"]), "Entered", "Run Workload Under Lock") == []
    assert outputs["jsonata"]["skipped"] is True and outputs["jsonata"]["lock"]["holder"] == holder, outputs
    assert outputs["jsonata"] == outputs["jsonpath"], "the flavours skip with different outputs"
    assert lock.holders() == [holder], "a skip changed the lock"
    assert ended(sfn, holder)["status"] == "SUCCEEDED" and lock.holders() == []


def test_a_failed_workload_releases_at_once_and_fails_with_its_error(aws, default_stack, deployed):
    """The workload's function throws (here: release-lock refusing the
    workload's input, InvalidLockRequest): the lock is released at once, with
    no hold, and the execution fails with that error, in both flavours."""
    sfn = aws.client("stepfunctions")
    _, values, _, _ = deployed["locked-workflow"]
    machines = flavours_of(aws, deployed, "locked-workflow", "failing",
                           WorkloadFunctionArn=values["ReleaseLockFunctionArn"])
    ends = run_both(sfn, machines, {"not": "a release request"})
    for flavour, described in ends.items():
        assert described["status"] == "FAILED", (flavour, described)
        events = history(sfn, described["executionArn"])
        assert state_events(events, "Entered", "Wait For Workload To Stop") == [], f"{flavour}: held"
        assert len(state_events(events, "Exited", "Release Lock After Failure")) == 1, flavour
        assert Lock(aws, default_stack["outputs"]["LockStoreUrl"], machines[flavour][1]).holders() == []
    assert ends["jsonata"]["error"] == ends["jsonpath"]["error"] == "InvalidLockRequest", ends
    assert ends["jsonata"].get("cause") == ends["jsonpath"].get("cause")


def test_a_timed_out_workload_holds_the_lock_then_releases_it(aws, default_stack, deployed):
    """WorkloadTimeoutSeconds 2 against a 6 s workload: States.Timeout ends
    the Task, not the invocation, so both flavours hold the lock for
    WorkloadMaxRunSeconds (4 s here) in Wait For Workload To Stop, then
    release and fail with States.Timeout."""
    sfn = aws.client("stepfunctions")
    store = default_stack["outputs"]["LockStoreUrl"]
    machines = flavours_of(aws, deployed, "locked-workflow", "timeout",
                           WorkloadTimeoutSeconds="2", WorkloadMaxRunSeconds="4")
    held_while_waiting = {}

    def watch(started):
        for flavour, (arn, lock_name) in started.items():
            poll(f"{flavour} waits for its workload to stop",
                 lambda arn=arn: state_events(history(sfn, arn), "Entered", "Wait For Workload To Stop") or None,
                 timeout=60)
            held_while_waiting[flavour] = Lock(aws, store, lock_name).holders() == [arn]

    ends = run_both(sfn, machines, {"sleepSeconds": 6}, watch)
    assert held_while_waiting == {"jsonpath": True, "jsonata": True}, held_while_waiting
    for flavour, described in ends.items():
        assert described["status"] == "FAILED" and described["error"] == "States.Timeout", (flavour, described)
        assert Lock(aws, store, machines[flavour][1]).holders() == [], f"{flavour}: the lock was not released"
    assert ends["jsonata"].get("cause") == ends["jsonpath"].get("cause")


def test_pass_lock_to_workload_gives_the_workload_its_grant(aws, default_stack, deployed):
    """PassLockToWorkload=true (LockResultPath "$.sfnLock"): the workload gets
    the input plus sfnLock = {lockName, owner, fencingToken, expiresAt}; the
    JSONata flavour builds it from the variable, the JSONPath one from ResultPath."""
    sfn = aws.client("stepfunctions")
    machines = flavours_of(aws, deployed, "locked-workflow", "passlock", LockResultPath='"$.sfnLock"')
    ends = run_both(sfn, machines, {"who": "passlock"})
    for flavour, described in ends.items():
        assert described["status"] == "SUCCEEDED", (flavour, described)
        output = json.loads(described["output"])
        grant = output.pop("sfnLock")
        assert output == {"who": "passlock"}, (flavour, output)
        assert sorted(grant) == ["expiresAt", "fencingToken", "lockName", "owner"], (flavour, grant)
        assert grant["owner"] == described["executionArn"] and grant["lockName"] == machines[flavour][1]
        events = history(sfn, described["executionArn"])
        assert int(grant["fencingToken"]) == granted_token(events, described["executionArn"])
