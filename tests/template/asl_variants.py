#!/usr/bin/env python3
"""skip-if-running.asl.json is locked-workflow.asl.json but for the skip.

The two definitions share every state after the acquire (the workload's Catch,
the wait for a timed-out workload, the releases, the re-raise): a fix to one
must not silently miss the other. This check takes the skip variant, undoes
exactly the documented differences, and requires the result to equal the
locked workflow:

- Acquire Lock sends no waitStartedAt / maxWaitSeconds (it never waits) and has
  no LockUnavailable retrier;
- its one extra Catch takes LockUnavailable, and only that (a store error must
  never become a skip), to the two added Pass states Parse Lock Held and
  Skipped, which run nothing and end the execution (Parse Lock Held -> Skipped,
  End, with skipped: true);
- the Comments differ.

Usage: asl_variants.py | asl_variants.py --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "statemachine"
SKIP_STATES = ("Parse Lock Held", "Skipped")
WAIT_FIELDS = ("waitStartedAt.$", "maxWaitSeconds")


def load(name: str) -> dict:
    """A definition, its unquoted ${...} placeholders turned into strings."""
    text = (MACHINES / name).read_text()
    return json.loads(re.sub(r"(:\s*)(\$\{\w+\})(\s*[,\n}])", r'\1"\2"\3', text))


def without_comments(value):
    if isinstance(value, dict):
        return {k: without_comments(v) for k, v in value.items() if k != "Comment"}
    if isinstance(value, list):
        return [without_comments(v) for v in value]
    return value


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
        mine, theirs = without_comments(skip)["States"], without_comments(locked)["States"]
        differing = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
        if without_comments({k: v for k, v in skip.items() if k != "States"}) != \
                without_comments({k: v for k, v in locked.items() if k != "States"}):
            differing.append("(top level)")
        out.append(f"differs from locked-workflow.asl.json beyond the skip: {differing}")
    return out


def self_test() -> int:
    locked, skip = load("locked-workflow.asl.json"), load("skip-if-running.asl.json")
    failures = 0
    if problems(locked, skip):
        print(f"FAIL rejects the shipped definitions: {problems(locked, skip)}")
        failures += 1
    cases = {
        "a release retrier changed in one file only":
            lambda s: s["States"]["Release Lock"]["Retry"][0].update(MaxAttempts=1),
        "the timed-out workload's wait gone from one file":
            lambda s: s["States"]["Run Workload Under Lock"]["Catch"].pop(0),
        "the skip Catch widened to store errors":
            lambda s: s["States"]["Acquire Lock"]["Catch"][-1]["ErrorEquals"].append("LockStoreUnavailable"),
        "a wait retrier in the skip variant":
            lambda s: s["States"]["Acquire Lock"]["Retry"].insert(0, {"ErrorEquals": ["LockUnavailable"]}),
        "a wait bound sent": lambda s: s["States"]["Acquire Lock"]["Parameters"]["Payload"].update(
            maxWaitSeconds=60),
        "the execution timeout changed": lambda s: s.update(TimeoutSeconds=1),
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
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(load("locked-workflow.asl.json"), load("skip-if-running.asl.json"))
    for problem in found:
        print(f"asl_variants: {problem}")
    print(f"asl_variants: skip-if-running.asl.json vs locked-workflow.asl.json: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
