"""The demo's stack: the binaries built, template.yaml packaged and deployed
into the emulator by the deployed tier's own code (tests/deployed/deploy.py,
imported, so the demo deploys exactly what the tier tests), and the few reads
the story needs, all through the AWS APIs a user has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "deployed"))
import deploy  # noqa: E402  (tests/deployed: package() and deploy(), as the tier uses them)
from lockstate import Lock, poll  # noqa: E402,F401  (poll: the other acts' too)

STACK = "sfn-lock-demo"
LOCK_NAME = "nightly-etl"
# LockName: every state machine of the stack contends for this one lock.
# CleanupDelaySeconds and WorkloadMaxRunSeconds at their minimums (as in
# tests/deployed/test_sweep.py): the delayed queue and the sweep's grace are
# 20 s and 30 s instead of 60 s and 900 s, so a stopped execution's lock is
# freed within the demo's two minutes. Nothing else changes.
PARAMETERS = {"LockName": LOCK_NAME, "CleanupDelaySeconds": "20", "WorkloadMaxRunSeconds": "30"}
BINARIES = ("acquire-lock", "release-lock", "release-execution-locks", "sfn-lock")


def build(story) -> None:
    """The three functions' binaries and the CLI, debug builds, by the command
    deploy.package() runs too (it then finds them fresh). cargo decides what
    is stale; its progress is shown only when a binary is missing: the first
    build compiles for minutes, and the newcomer should see it move."""
    missing = [b for b in BINARIES if not (ROOT / "target" / "debug" / b).is_file()]
    command = [arg for arg in deploy.CARGO_BUILD if arg != "--quiet"]
    if missing:
        story.say(f"building the binaries ({' '.join(command)}): the first build compiles the workspace, "
                  "about 2 min on 2 cores…")
    else:
        story.say(f"building the binaries ({' '.join(command)})…")
        command.append("--quiet")
    start = time.monotonic()
    subprocess.run(command, cwd=ROOT, check=True)
    story.say(f"  the functions and the CLI ready in target/debug ({time.monotonic() - start:.1f} s)")


class Stack:
    """The deployed stack as the story sees it: its outputs, its executions
    and the lock's record in the table its LockStoreUrl names."""

    def __init__(self, story, session: boto3.Session, outputs: dict[str, str]):
        self.story = story
        self.session = session
        self.outputs = outputs
        self.sfn = session.client("stepfunctions")
        self.lock = Lock(session, outputs["LockStoreUrl"], LOCK_NAME)

    # ------------------------------------------------------------ executions
    def start(self, machine: str, letter: str, workload_seconds: float) -> str:
        """Starts an execution of the output `machine`; the sample workload
        sleeps `workload_seconds` under the lock and returns its input."""
        arn = self.sfn.start_execution(
            stateMachineArn=self.outputs[machine], name=f"{letter}-{int(time.time())}",
            input=json.dumps({"sleepSeconds": workload_seconds}))["executionArn"]
        self.story.name(arn, letter)
        return arn

    def describe(self, arn: str) -> dict:
        return self.sfn.describe_execution(executionArn=arn)

    def ended(self, arn: str, timeout: float = 60) -> dict:
        letter = self.story.names.get(arn, arn)
        return poll(f"execution {letter} ends",
                    lambda: (d := self.describe(arn))["status"] != "RUNNING" and d, timeout=timeout)

    def succeeded(self, arn: str, timeout: float = 60) -> dict:
        done = self.ended(arn, timeout)
        self.story.expect(done["status"] == "SUCCEEDED",
                          f"execution {self.story.names.get(arn)} ended {done['status']}: {done}")
        return done

    # --------------------------------------------------------------- the lock
    def holds(self, owner: str, timeout: float = 30) -> int:
        """Waits until `owner` is the lock's holder; returns its fencing token
        (the record keeps the last one granted, which is this holder's)."""
        poll(f"{self.story.who(owner)} holds {LOCK_NAME}", lambda: self.lock.holders() == [owner],
             timeout=timeout, pause=0.1)
        return self.lock.fencing_token()

    def free(self, timeout: float = 30) -> None:
        poll(f"{LOCK_NAME} is free", lambda: self.lock.holders() == [], timeout=timeout, pause=0.1)

    def queue_length(self) -> int:
        return int((self.lock.item() or {}).get("queueLength", 0))


def deploy_stack(story) -> Stack:
    """`sam package` and `sam deploy`, as tests/deployed does them."""
    session = boto3.Session()
    logs = Path(os.environ.get("SFN_LOCK_DEPLOYED_LOGS", ROOT / "target"))
    start = time.monotonic()
    story.say("packaging as `sam package` does: a zip per function, the four definitions, "
              "the template, into the emulator's S3…")
    packaged = deploy.package(session, out_dir=logs / "package")
    story.say(f"  packaged in {time.monotonic() - start:.1f} s")

    settings = ", ".join(f"{k}={v}" for k, v in PARAMETERS.items())
    story.say(f"deploying the stack ({STACK}: template.yaml unmodified, {settings}) "
              "through a CloudFormation change set…")
    start = time.monotonic()
    outputs = deploy.deploy(STACK, packaged.template_url, PARAMETERS, session)
    took = time.monotonic() - start
    resources = session.client("cloudformation").describe_stack_resources(StackName=STACK)["StackResources"]
    story.say(f"  CREATE_COMPLETE: {len(resources)} resources in {took:.1f} s "
              "(the table, 3 functions with versions and aliases, 3 state machines, "
              "the rule, queues and mapping of the sweep, alarms, a dashboard)")
    return Stack(story, session, outputs)
