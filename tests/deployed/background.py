"""Scenarios started before the first test and checked by their tests at the
end (conftest.py's `swept` and `scheduled`): each waits on a clock of the
emulator's own, the sweep's grace (30 s) or the scheduler's tick (every
10 s), and the other scenarios run meanwhile. Also what a user creates
before deploying a variant: their own state machines, role and topic."""

from __future__ import annotations

import datetime
import json
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import boto3

import cli
from lockstate import Lock, Watch, poll

DEFAULT_LOCK_NAME = "sfn-lock-default"
# The user's own wrapped state machine (LockedStateMachineArns) and its lock.
USER_LOCK_NAME = "user-report"
USER_MACHINE = "user-report-locked"
# The stopped holders' work outlives every deadline here: only the sweep can
# free their locks in time (ministack's StopExecution lets the running state
# go on, and the execution's own release would come after this).
WORKLOAD_SECONDS = 240
SWEEP_GRACE_SECONDS = 30  # WorkloadMaxRunSeconds of the sweep variant
SWEEP_DEADLINE_SECONDS = 180
# Lines for the run's summary (conftest.py): what a timing-bound scenario saw.
NOTES: list[str] = []


def _role(iam, name: str) -> str:
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    return iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]


def user_resources(aws) -> dict[str, str]:
    """The attach variant's target: a state machine of the user's own that
    waits $.waitSeconds and answers its input under "input"; and a topic."""
    definition = {"StartAt": "Work", "States": {
        "Work": {"Type": "Wait", "SecondsPath": "$.waitSeconds", "Next": "Done"},
        "Done": {"Type": "Pass", "Parameters": {"etl": "done", "input.$": "$"}, "End": True}}}
    target = aws.client("stepfunctions").create_state_machine(
        name="nightly-etl", roleArn=_role(aws.client("iam"), "nightly-etl-role"),
        definition=json.dumps(definition))["stateMachineArn"]
    topic = aws.client("sns").create_topic(Name="sfn-lock-alarms")["TopicArn"]
    return {"target": target, "topic": topic}


def _machine_arn(aws, name: str) -> str:
    account = aws.client("sts").get_caller_identity()["Account"]
    return f"arn:aws:states:{aws.region_name}:{account}:stateMachine:{name}"


def _wrapped_user_machine(aws, outputs) -> str:
    """README's recipe: `sfn-lock wrap` puts the lock around the user's own
    definition; its ${...} are given the stack's version outputs (the user's
    DefinitionSubstitutions); created under the name LockedStateMachineArns
    was given before the stack existed."""
    with tempfile.TemporaryDirectory() as d:
        mine = Path(d) / "report.asl.json"
        mine.write_text(json.dumps({"TimeoutSeconds": 600, "StartAt": "Work", "States": {
            "Work": {"Type": "Wait", "SecondsPath": "$.waitSeconds", "End": True}}}))
        wrapped = subprocess.run([str(cli.CLI), "wrap", USER_LOCK_NAME,
                                  "--workload-max-run-seconds", str(SWEEP_GRACE_SECONDS), str(mine)],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
    for key in ("AcquireLockFunctionArn", "ReleaseLockFunctionArn"):
        wrapped = wrapped.replace("${%s}" % key, outputs[f"{key[:-3]}VersionArn"])
    assert "${" not in wrapped, "wrap left a substitution the recipe does not name"
    return aws.client("stepfunctions").create_state_machine(
        name=USER_MACHINE, roleArn=_role(aws.client("iam"), "user-report-role"),
        definition=wrapped)["stateMachineArn"]


def _hold_and_stop(aws, machine: str, store_url: str, lock_name: str, input_: dict) -> dict:
    """Starts an execution, waits until it holds its lock, stops it."""
    sfn = aws.client("stepfunctions")
    lock = Lock(aws, store_url, lock_name)
    assert lock.holders() == [], f"{lock_name} is held before the scenario"
    arn = sfn.start_execution(stateMachineArn=machine, name=f"stopped-{uuid.uuid4().hex[:8]}",
                              input=json.dumps(input_))["executionArn"]
    poll(f"{arn} holds {lock_name}", lambda: lock.holders() == [arn], timeout=60)
    sfn.stop_execution(executionArn=arn, error="Test.Stopped", cause="the deployed tier stops it")
    stopped = sfn.describe_execution(executionArn=arn)
    # Watched from a thread of its own, with a client of its own.
    watched = Lock(boto3.Session(), store_url, lock_name)
    # Not "free": a queued waiter may be handed the lock by the same write.
    watch = Watch(f"the sweep frees {lock_name} of stopped {arn}", lambda: arn not in watched.holders(),
                  timeout=SWEEP_DEADLINE_SECONDS)
    return {"arn": arn, "status": stopped["status"], "stopped_at": stopped["stopDate"].timestamp(),
            "watch": watch}


def stop_two_holders(deploy_stack) -> dict:
    """The sweep variant, deployed with the user's wrapped state machine in
    LockedStateMachineArns; an execution of the stack's locked workflow and
    one of the user's machine, each holding its lock, both stopped."""
    aws = boto3.Session()
    user_arn = _machine_arn(aws, USER_MACHINE)
    stack = deploy_stack({"CleanupDelaySeconds": "20", "WorkloadMaxRunSeconds": str(SWEEP_GRACE_SECONDS),
                          "LockedStateMachineArns": user_arn})
    outputs = stack["outputs"]
    assert _wrapped_user_machine(aws, outputs) == user_arn
    store = outputs["LockStoreUrl"]
    stopped = {
        "stack": _hold_and_stop(aws, outputs["LockedWorkflowStateMachineArn"], store, DEFAULT_LOCK_NAME,
                                {"sleepSeconds": WORKLOAD_SECONDS}),
        "user": _hold_and_stop(aws, user_arn, store, USER_LOCK_NAME, {"waitSeconds": WORKLOAD_SECONDS}),
    }
    # A queued execution waits behind the stopped holder: the sweep's release
    # hands it the lock (test_sweep_handoff.py).
    sfn, lock = aws.client("stepfunctions"), Lock(aws, store, DEFAULT_LOCK_NAME)
    waiter = sfn.start_execution(stateMachineArn=outputs["QueuedWorkflowStateMachineArn"],
                                 name=f"waiter-{uuid.uuid4().hex[:8]}",
                                 input=json.dumps({"sleepSeconds": 0, "who": "waiter"}))["executionArn"]
    poll("the waiter queued behind the stopped holder", lambda: lock.queue_length() == 1, timeout=60)
    # The reconciler (ReconcileSchedule's input, by Lambda Invoke) while both
    # stopped holders are inside their grace: it must look and keep them.
    answer = aws.client("lambda").invoke(FunctionName=outputs["ReleaseExecutionLocksFunctionArn"],
                                         Payload=json.dumps({"sfnLockReconcile": {}}))
    reconciled = {"error": answer.get("FunctionError"), "report": json.loads(answer["Payload"].read()),
                  "at": time.time()}
    return {"stack": stack, "stopped": stopped, "waiter": waiter, "reconciled": reconciled}


def schedule_behind_the_cli(deploy_stack) -> dict:
    """`sfn-lock run` holds the lock on the SSM store (its path is the stack's
    name, known before the stack exists); then the stack is deployed with a
    ScheduleExpression at() two seconds on, alarms and dashboard off."""
    store = "ssm:///sfn-lock/sfn-lock-scheduled"
    holder = cli.Holder(store, DEFAULT_LOCK_NAME, "cron-host")
    try:
        token = holder.token()
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
        stack = deploy_stack({"LockStore": "ssm", "ScheduleExpression": f"at({at:%Y-%m-%dT%H:%M:%S})",
                              "Alarms": "false", "Dashboard": "false"})
    except BaseException:
        holder.stop()
        raise
    assert stack["outputs"]["LockStoreUrl"] == store
    return {"stack": stack, "holder": holder, "token": token}
