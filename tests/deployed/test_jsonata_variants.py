"""The JSONata flavour on two other variants of the deployed tier: the
attach wrapper (sfn-lock-attach, whose TargetStateMachineArn is the user's
own machine) and the locked workflow on the S3 store (sfn-lock-s3), each
JSONata machine created with the values the template gave its JSONPath twin
there (jsonata_machines.py) and run beside it."""

from __future__ import annotations

import hashlib
import json

from jsonata_machines import both_flavours, ended, flavoured, run_both, start
from lockstate import Lock, history, poll, state_events
from test_jsonata import take_turns


def test_jsonata_and_jsonpath_executions_take_turns_on_the_s3_store(aws, s3_stack):
    sfn = aws.client("stepfunctions")
    jsonpath = s3_stack["outputs"]["LockedWorkflowStateMachineArn"]
    _, _, jsonata = flavoured(sfn, jsonpath, "locked-workflow")
    take_turns(aws, s3_stack["outputs"]["LockStoreUrl"], jsonpath, jsonata)


def test_jsonata_attach_runs_the_users_machine_under_the_lock(aws, attach_stack, user_resources):
    """The attach wrapper around the user's own machine (the attach variant's
    TargetStateMachineArn): the child named after the parent, its output the
    parent's, in both flavours; then a child that outlives TargetTimeoutSeconds
    (2 s here): stopped by its name, the lock held for WorkloadMaxRunSeconds
    (2 s here), then released, and States.Timeout in both."""
    sfn = aws.client("stepfunctions")
    arn = attach_stack["outputs"]["AttachedWorkflowStateMachineArn"]
    values, role, jsonata = flavoured(sfn, arn, "attach-existing")
    lock = Lock(aws, attach_stack["outputs"]["LockStoreUrl"], values["LockName"])
    given = {"waitSeconds": 2, "batch": "2030-01-01"}
    outputs = {}
    for flavour, machine in (("jsonata", jsonata), ("jsonpath", arn)):
        assert lock.holders() == []
        parent = start(sfn, machine, f"attach-{flavour}", given)

        def child_runs(parent=parent):
            running = [e for e in sfn.list_executions(stateMachineArn=user_resources["target"])["executions"]
                       if e["status"] == "RUNNING"]
            return lock.holders() == [parent] and running

        children = poll(f"the {flavour} wrapper's child runs under the lock", child_runs, timeout=60)
        digest = hashlib.sha256(parent.encode()).hexdigest()
        # AWS: "-0"; ministack leaves the redrive count unset ("-None" from
        # States.Format, "-" from JSONata's & of an undefined value).
        assert len(children) == 1 and children[0]["name"] in {f"{digest}-0", f"{digest}-None", f"{digest}-"}, children
        ends = ended(sfn, parent, timeout=60)
        assert ends["status"] == "SUCCEEDED", ends
        outputs[flavour] = json.loads(ends["output"])
    assert outputs["jsonata"] == outputs["jsonpath"] == {"etl": "done", "input": given}, outputs
    assert lock.holders() == []

    # A child that outlives its Task's timeout.
    machines = both_flavours(sfn, values, role, "attach-existing", "attach-timeout",
                             WorkloadMaxRunSeconds="2", TargetTimeoutSeconds="2")
    held = {}

    def watch(started):
        for flavour, (parent, lock_name) in started.items():
            poll(f"{flavour} waits for the child's work to stop",
                 lambda parent=parent: state_events(history(sfn, parent), "Entered", "Wait For Target To Stop") or None,
                 timeout=60)
            held[flavour] = Lock(aws, attach_stack["outputs"]["LockStoreUrl"], lock_name).holders() == [parent]

    ends = run_both(sfn, machines, {"waitSeconds": 6}, watch)
    assert held == {"jsonpath": True, "jsonata": True}, held
    for flavour, described in ends.items():
        assert described["status"] == "FAILED" and described["error"] == "States.Timeout", (flavour, described)
        events = history(sfn, described["executionArn"])
        assert state_events(events, "Exited", "Stop Target Execution"), f"{flavour}: the child was not stopped"
        assert Lock(aws, attach_stack["outputs"]["LockStoreUrl"], machines[flavour][1]).holders() == []
    assert ends["jsonata"]["error"] == ends["jsonpath"]["error"], ends
