"""The sfn-lock CLI (target/debug/sfn-lock, a real process) on the deployed
stack's store, named by its LockStoreUrl output, on the same lock as the
stack's locked workflow: each excludes the other, and what the CLI shows is
what the executions did."""

from __future__ import annotations

import json
import uuid

import cli
from lockstate import Lock, history, poll, task_errors

LOCK_NAME = "sfn-lock-default"
SKIPPED = "ran-although-held"


def start(sfn, outputs, name, given):
    return sfn.start_execution(stateMachineArn=outputs["LockedWorkflowStateMachineArn"],
                               name=f"{name}-{uuid.uuid4().hex[:8]}", input=json.dumps(given))["executionArn"]


def ended(sfn, arn):
    described = poll(f"{arn} ends",
                     lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
                     timeout=120)
    assert described["status"] == "SUCCEEDED", described
    return described


def refused_by(sfn, arn, holder):
    """The execution's acquire was refused (LockUnavailable, retried) naming
    the holder, while it still runs."""
    for event in history(sfn, arn):
        details = event.get("taskFailedEventDetails", {})
        if details.get("error") == "LockUnavailable":
            return holder in details.get("cause", "")
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING", f"{arn} ended without waiting"
    return False


def test_cli_and_the_locked_workflow_exclude_each_other(aws, default_stack, tmp_path):
    outputs = default_stack["outputs"]
    store, sfn = outputs["LockStoreUrl"], aws.client("stepfunctions")
    lock = Lock(aws, store, LOCK_NAME)
    assert lock.holders() == []

    # An execution holds (long enough for four CLI commands): the CLI sees
    # it, and does not take the lock.
    first = start(sfn, outputs, "first", {"sleepSeconds": 6})
    poll("the first execution holds the lock", lambda: lock.holders() == [first], timeout=60)
    shown = cli.status(store, LOCK_NAME)
    assert [h["owner"] for h in shown["holders"]] == [first] and shown["held"] is True
    assert shown["fencingToken"] == lock.fencing_token()
    listed = json.loads(cli.run(store, "list", "--json").stdout)["locks"]
    entry = [lock for lock in listed if lock["lockName"] == LOCK_NAME]
    assert len(entry) == 1 and [h["owner"] for h in entry[0]["holders"]] == [first], listed
    marker = tmp_path / SKIPPED
    skip = cli.run(store, "run", "-n", "-x", LOCK_NAME, "--", "touch", str(marker))
    busy = cli.run(store, "run", "-n", LOCK_NAME, "--", "touch", str(marker))
    assert lock.holders() == [first], "the first execution let go during the CLI's checks: lengthen its sleep"
    assert skip.returncode == 0 and not marker.exists(), skip.stderr  # cron: skip quietly
    assert busy.returncode == 111 and not marker.exists(), busy.stderr

    # The CLI waits for the execution, then holds; a second execution waits
    # for the CLI, refused with the CLI's owner named.
    holder = cli.Holder(store, LOCK_NAME, f"ci-job-{uuid.uuid4().hex[:6]}", "--wait", "60")
    try:
        cli_token = holder.token()
        ended(sfn, first)
        assert lock.holders() == [holder.owner]
        second = start(sfn, outputs, "second", {"sleepSeconds": 0})
        poll("the second execution refused while the CLI holds", lambda: refused_by(sfn, second, holder.owner),
             timeout=60)
        assert lock.holders() == [holder.owner]
        status, err = holder.finish()
    finally:
        holder.stop()
    assert status == 0, err

    ended(sfn, second)
    assert "LockUnavailable" not in task_errors(history(sfn, first))
    tokens = [granted(sfn, first), cli_token, granted(sfn, second)]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3, tokens
    assert cli.status(store, LOCK_NAME)["held"] is False and lock.holders() == []


def granted(sfn, arn) -> int:
    """The fencing token of the execution's successful acquire."""
    for event in history(sfn, arn):
        output = event.get("taskSucceededEventDetails", {}).get("output", "")
        payload = json.loads(output).get("Payload", {}) if output else {}
        if payload.get("outcome") == "granted" and payload.get("owner") == arn:
            return int(payload["fencingToken"])
    raise AssertionError(f"{arn}: no grant in its history")
