#!/usr/bin/env python3
"""skip-if-running.asl.json and queued-workflow.asl.json are locked-workflow.asl.json
but for the skip and for the queue.

Why Python, not a tool: it compares three definitions with each other (undoing the
documented differences); no ASL or CloudFormation tool relates two files.

The definitions share every state after the acquire (the workload branch with
its re-raise of an error that may leave the invocation running and its marker of
one that proves it ended, Check Whether Workload Failed and the states it routes to, the
held path Wait For Workload To Stop, the releases, the re-raise), and the lease:
a fix to one must not silently miss the others. This check takes each variant, undoes
exactly its documented differences, and requires the result to equal the
locked workflow.

skip-if-running.asl.json:

- Acquire Lock sends no waitStartedAt / maxWaitSeconds (it never waits) and has
  no LockUnavailable retrier;
- its one extra Catch takes LockUnavailable, and only that (a store error must
  never become a skip), to the two added Pass states Parse Lock Held and
  Skipped, which run nothing and end the execution (Parse Lock Held -> Skipped,
  End, with skipped: true);
- the Comments differ.

queued-workflow.asl.json (issue 11, the fair queue):
- Acquire Lock is a Lambda callback task (lambda:invoke.waitForTaskToken) that
  passes taskToken.$ = $$.Task.Token, so acquire-lock can queue it and a release
  can admit it later;
- its TimeoutSeconds is ${MaxWaitSeconds}: the wait in the queue is bounded
  (nothing else ends it: a queued waiter makes no further calls), and no retrier
  takes States.Timeout or States.ALL (a retry would start the wait afresh);
- its ResultSelector reads the grant at the top level ($.x, the SendTaskSuccess
  output), not under $.Payload;
- one Catch takes States.Timeout, and only that, to a release state (the one
  after failure, its Next and Catch pointed on) that invokes the release function
  for this owner and then fails with the Fail state LockWaitTimeout: the waiter
  may have been handed the lock as the wait ran out, and its queue entry must go;
- acquire-lock's own LockWaitTimeout is caught too, into Release Lock After
  Failure: an earlier attempt may still have an entry in the queue;
- the Comments differ.

Usage: asl_variants.py | asl_variants.py --self-test
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from asl_walk import load, without_comments, workload_branch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "statemachine"
SKIP_STATES = ("Parse Lock Held", "Skipped")
WAIT_FIELDS = ("waitStartedAt.$", "maxWaitSeconds")
CALLBACK = "arn:${Partition}:states:::lambda:invoke.waitForTaskToken"  # partition.py: the stack's partition
QUEUE_STATES = ("Release Lock After Wait Timeout", "Fail With Lock Wait Timeout")


def differing(variant: dict, locked: dict) -> list[str]:
    """The states (and "(top level)") in which two definitions differ, Comments aside."""
    mine, theirs = without_comments(variant).get("States", {}), without_comments(locked)["States"]
    found = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
    if without_comments({k: v for k, v in variant.items() if k != "States"}) != \
            without_comments({k: v for k, v in locked.items() if k != "States"}):
        found.append("(top level)")
    return found


def problems(locked: dict, skip: dict) -> list[str]:
    out = []
    skip = copy.deepcopy(skip)
    states = skip.get("States", {})
    acquire = states.get("Acquire Lock", {})
    skip_catches = [c for c in acquire.get("Catch", []) if c.get("Next") == SKIP_STATES[0]]
    if [c.get("ErrorEquals") for c in skip_catches] != [["LockUnavailable"]]:
        out.append(f"Acquire Lock must have one Catch to {SKIP_STATES[0]!r}, on LockUnavailable only: "
                   f"{[c.get('ErrorEquals') for c in skip_catches]}")
    if any("LockUnavailable" in r.get("ErrorEquals", []) for r in acquire.get("Retry", [])):
        out.append("Acquire Lock retries LockUnavailable: a skip variant must not wait")
    payload = acquire.get("Parameters", {}).get("Payload", {})
    if any(field in payload for field in WAIT_FIELDS):
        out.append(f"Acquire Lock sends a wait bound ({[f for f in WAIT_FIELDS if f in payload]})")
    for name in SKIP_STATES:
        if name not in states:
            out.append(f"no state {name!r}")
    parse, skipped = states.get(SKIP_STATES[0]), states.get(SKIP_STATES[1])
    if parse is not None and (parse.get("Type") != "Pass" or parse.get("Next") != SKIP_STATES[1]):
        out.append(f"{SKIP_STATES[0]!r} must be a Pass state whose Next is {SKIP_STATES[1]!r}")
    if skipped is not None and (skipped.get("Type") != "Pass" or skipped.get("End") is not True
                                or "Next" in skipped or skipped.get("Parameters", {}).get("skipped") is not True):
        out.append(f"{SKIP_STATES[1]!r} must be a Pass state that ends the execution with skipped: true")
    # Undo the documented differences; what is left must be the locked workflow.
    acquire["Catch"] = [c for c in acquire.get("Catch", []) if c not in skip_catches]
    locked_acquire = locked["States"]["Acquire Lock"]
    acquire["Retry"] = [r for r in locked_acquire["Retry"] if "LockUnavailable" in r["ErrorEquals"]] + \
        acquire.get("Retry", [])
    for field in WAIT_FIELDS:
        if field in locked_acquire["Parameters"]["Payload"]:
            payload[field] = locked_acquire["Parameters"]["Payload"][field]
    for name in SKIP_STATES:
        states.pop(name, None)
    if without_comments(skip) != without_comments(locked):
        out.append(f"differs from locked-workflow.asl.json beyond the skip: {differing(skip, locked)}")
    return out


def queue_problems(locked: dict, queued: dict) -> list[str]:
    out = []
    queued = copy.deepcopy(queued)
    states = queued.get("States", {})
    acquire = states.get("Acquire Lock", {})
    payload = acquire.get("Parameters", {}).get("Payload", {})
    if acquire.get("Resource") != CALLBACK:
        out.append(f"Acquire Lock's Resource is {acquire.get('Resource')!r}, not {CALLBACK!r}: nothing can admit a queued waiter")
    if payload.get("taskToken.$") != "$$.Task.Token":
        out.append(f"Acquire Lock passes taskToken.$ = {payload.get('taskToken.$')!r}, not $$.Task.Token")
    if acquire.get("TimeoutSeconds") != "${MaxWaitSeconds}" or "TimeoutSecondsPath" in acquire:
        out.append(f"Acquire Lock's TimeoutSeconds is {acquire.get('TimeoutSeconds')!r}, not ${{MaxWaitSeconds}}: "
                   "the wait in the queue would be unbounded")
    restarts = [r["ErrorEquals"] for r in acquire.get("Retry", [])
                if {"States.Timeout", "States.ALL"} & set(r.get("ErrorEquals", []))]
    if restarts:
        out.append(f"Acquire Lock retries {restarts}: a retried States.Timeout starts the wait afresh")
    catches = acquire.get("Catch", [])
    timeouts = [c for c in catches if "States.Timeout" in c.get("ErrorEquals", [])]
    release_name = QUEUE_STATES[0]
    if [c.get("ErrorEquals") for c in timeouts] != [["States.Timeout"]] or timeouts[0].get("Next") != release_name:
        out.append(f"Acquire Lock must have one Catch, on States.Timeout only, to {release_name!r}: "
                   f"{[(c.get('ErrorEquals'), c.get('Next')) for c in timeouts]}")
    if not any("LockWaitTimeout" in c.get("ErrorEquals", []) and c.get("Next") == "Release Lock After Failure"
               for c in catches):
        out.append("acquire-lock's LockWaitTimeout is not released (Release Lock After Failure): "
                   "an earlier attempt's queue entry may remain")
    release, fail = states.get(QUEUE_STATES[0]), states.get(QUEUE_STATES[1])
    if fail is None or fail.get("Type") != "Fail" or fail.get("Error") != "LockWaitTimeout":
        out.append(f"{QUEUE_STATES[1]!r} must be a Fail state with Error LockWaitTimeout")
    if release is None:
        out.append(f"no state {release_name!r}: a wait that ran out must release before it fails")
    else:
        # The release after failure, its exits pointed at the LockWaitTimeout Fail state.
        expected = copy.deepcopy(locked["States"]["Release Lock After Failure"])
        expected["Next"] = QUEUE_STATES[1]
        # A waiter that gives up says so: a lock held by another is then
        # `withdrawn`, not `held_by_other` (issue 22).
        expected.setdefault("Parameters", {}).setdefault("Payload", {})["withdraw"] = True
        for catcher in expected.get("Catch", []):
            catcher["Next"] = QUEUE_STATES[1]
        if without_comments(release) != without_comments(expected):
            out.append(f"{release_name!r} is not Release Lock After Failure leading to {QUEUE_STATES[1]!r} "
                       "(invoke the release function for this owner with withdraw: true, retried, then fail with "
                       "LockWaitTimeout)")
    # Undo the documented differences; what is left must be the locked workflow.
    locked_acquire = locked["States"]["Acquire Lock"]
    acquire["Resource"] = locked_acquire["Resource"]
    payload.pop("taskToken.$", None)
    acquire.pop("TimeoutSeconds", None)
    acquire["ResultSelector"] = {k: v.replace("$.", "$.Payload.", 1) if isinstance(v, str) else v
                                 for k, v in acquire.get("ResultSelector", {}).items()}
    acquire["Catch"] = [dict(c, ErrorEquals=[e for e in c.get("ErrorEquals", []) if e != "LockWaitTimeout"])
                        for c in catches if c not in timeouts]
    for name in QUEUE_STATES:
        states.pop(name, None)
    if without_comments(queued) != without_comments(locked):
        out.append(f"differs from locked-workflow.asl.json beyond the queue: {differing(queued, locked)}")
    return out


def self_test() -> int:
    locked, skip = load(MACHINES / "locked-workflow.asl.json"), load(MACHINES / "skip-if-running.asl.json")
    failures = 0
    if problems(locked, skip):
        print(f"FAIL rejects the shipped definitions: {problems(locked, skip)}")
        failures += 1
    cases = {
        "a release retrier changed in one file only":
            lambda s: s["States"]["Release Lock"]["Retry"][0].update(MaxAttempts=1),
        "the held path gone from one file":
            lambda s: s["States"]["Run Workload Under Lock"]["Catch"].pop(0),
        "the workload's may-run catcher narrowed in one file":
            lambda s: workload_branch(s)["Run Workload"]["Catch"][0]["ErrorEquals"].remove("States.Timeout"),
        "the proven-end marker renamed in one file":
            lambda s: workload_branch(s)["Workload Ended With Error"].update(Parameters={"error.$": "$"}),
        "the marker Choice's routes swapped in one file":
            lambda s: (s["States"]["Check Whether Workload Failed"]["Choices"][0].update(Next="Release Lock"),
                       s["States"]["Check Whether Workload Failed"].update(Default="Take Workload Error")),
        "the error of a workload that may run released at once in one file":
            lambda s: workload_branch(s)["Run Workload"]["Catch"][0].update(Next="Workload Ended With Error"),
        "the may-run error raised again without its Cause in one file":
            lambda s: workload_branch(s)["Raise Workload Error Again"].pop("CausePath"),
        "the may-run re-raise's Cause test dropped in one file (CausePath on a missing Cause: States.Runtime)":
            lambda s: workload_branch(s)["Check Workload Error Cause"].update(Default="Raise Workload Error Again"),
        "the held Wait's Seconds changed in one file":
            lambda s: s["States"]["Wait For Workload To Stop"].update(Seconds="${WorkloadTimeoutSeconds}"),
        "the lease from another bound in one file": lambda s: s["States"]["Acquire Lock"]["Parameters"]["Payload"].update(
            {"leaseSeconds.$": "States.MathAdd(States.MathAdd(${LeaseMarginSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"}),
        "the skip Catch widened to store errors":
            lambda s: s["States"]["Acquire Lock"]["Catch"][-1]["ErrorEquals"].append("LockStoreUnavailable"),
        "a wait retrier in the skip variant":
            lambda s: s["States"]["Acquire Lock"]["Retry"].insert(0, {"ErrorEquals": ["LockUnavailable"]}),
        "a wait bound sent": lambda s: s["States"]["Acquire Lock"]["Parameters"]["Payload"].update(
            maxWaitSeconds=60),
        "an execution timeout added to one file": lambda s: s.update(TimeoutSeconds=1),
        "a skipped run going on to the workload":
            lambda s: (s["States"]["Skipped"].pop("End"), s["States"]["Skipped"].update(Next="Run Workload Under Lock")),
        "the skip parsed into a Task": lambda s: s["States"]["Parse Lock Held"].update(Type="Task"),
    }
    for name, change in cases.items():
        broken = copy.deepcopy(skip)
        change(broken)
        found = problems(locked, broken)
        print(f"{'ok  ' if found else 'FAIL'} asl-variants rejects {name}: {found[:1]}")
        failures += not found

    queued = load(MACHINES / "queued-workflow.asl.json")
    if queue_problems(locked, queued):
        print(f"FAIL rejects the shipped queue: {queue_problems(locked, queued)}")
        failures += 1

    def acquire(s: dict) -> dict:
        return s["States"]["Acquire Lock"]

    def timeout_catch(s: dict) -> dict:
        return next(c for c in acquire(s)["Catch"] if "States.Timeout" in c["ErrorEquals"])

    queue_cases = {
        "a plain invoke (no callback)": lambda s: acquire(s).update(Resource="arn:${Partition}:states:::lambda:invoke"),
        "no task token passed": lambda s: acquire(s)["Parameters"]["Payload"].pop("taskToken.$"),
        "the execution's id passed as the token":
            lambda s: acquire(s)["Parameters"]["Payload"].update({"taskToken.$": "$$.Execution.Id"}),
        "no TimeoutSeconds (an unbounded wait)": lambda s: acquire(s).pop("TimeoutSeconds"),
        "TimeoutSeconds from the workload's bound":
            lambda s: acquire(s).update(TimeoutSeconds="${WorkloadTimeoutSeconds}"),
        "States.Timeout retried": lambda s: acquire(s)["Retry"][1]["ErrorEquals"].append("States.Timeout"),
        "the wait timeout failing without a release": lambda s: timeout_catch(s).update(Next=QUEUE_STATES[1]),
        "the wait timeout caught with the store errors":
            lambda s: (acquire(s)["Catch"].remove(timeout_catch(s)),
                       acquire(s)["Catch"][0]["ErrorEquals"].append("States.Timeout")),
        "the wait-timeout release on another owner": lambda s: s["States"][QUEUE_STATES[0]]["Parameters"][
            "Payload"].update({"owner.$": "$$.Execution.Name"}),
        "the wait-timeout release without withdraw (held_by_other and its alarm for a waiter)":
            lambda s: s["States"][QUEUE_STATES[0]]["Parameters"]["Payload"].pop("withdraw"),
        "the wait-timeout release skipped on success": lambda s: s["States"][QUEUE_STATES[0]].update(
            Next="Check Whether Error Has Cause"),
        "States.Timeout re-raised, not LockWaitTimeout": lambda s: s["States"][QUEUE_STATES[1]].update(
            Error="States.Timeout"),
        "acquire-lock's LockWaitTimeout not released":
            lambda s: acquire(s)["Catch"][1]["ErrorEquals"].remove("LockWaitTimeout"),
        "the grant read under $.Payload": lambda s: acquire(s)["ResultSelector"].update(
            {"fencingToken.$": "$.Payload.fencingToken"}),
        "a release retrier changed in the queue only":
            lambda s: s["States"]["Release Lock"]["Retry"][0].update(MaxAttempts=1),
        "the lease formula changed": lambda s: acquire(s)["Parameters"]["Payload"].update(
            {"leaseSeconds.$": "States.MathAdd(States.MathAdd(${MaxWaitSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"}),
        "the marker's Choice changed in the queue only":
            lambda s: s["States"]["Check Whether Workload Failed"].update(Default="Take Workload Error"),
        "the workload's proven-end catcher widened in the queue only":
            lambda s: workload_branch(s)["Run Workload"]["Catch"].reverse(),
    }
    for name, change in queue_cases.items():
        broken = copy.deepcopy(queued)
        change(broken)
        found = queue_problems(locked, broken)
        print(f"{'ok  ' if found else 'FAIL'} asl-variants rejects a queue with {name}: {found[:1]}")
        failures += not found
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    locked = load(MACHINES / "locked-workflow.asl.json")
    total = 0
    for name, check in (("skip-if-running.asl.json", problems), ("queued-workflow.asl.json", queue_problems)):
        found = check(locked, load(MACHINES / name))
        for problem in found:
            print(f"asl_variants: {name}: {problem}")
        print(f"asl_variants: {name} vs locked-workflow.asl.json: {len(found)} problem(s)")
        total += len(found)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
