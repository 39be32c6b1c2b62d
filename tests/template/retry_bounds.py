"""The worst case of every retrier in the shipped ASL, computed from its
parameters, since the e2e suite replaces the pauses with milliseconds.

Why Python, not a tool: it computes each retrier's worst case (sums of capped, backed-off
pauses) from the definitions; asl-validator checks their shape, not their arithmetic.

- The wait for a held lock (Retry on LockUnavailable) must cap each pause
  (MaxDelaySeconds): acquire-lock ends the wait with LockWaitTimeout at its
  first attempt at or after MaxWaitSeconds, so the wait overshoots MaxWaitSeconds
  by at most one capped pause plus one acquire call. Without a cap, BackoffRate 2
  over its near-unlimited attempts would overshoot by hours.
- Every other retrier rides out a transient error: its pauses, each capped,
  added up over MaxAttempts, stay under TRANSIENT_BUDGET_SECONDS. So do the
  attach variant's Stop Target Execution and Describe Target Execution, which
  retry States.ALL: the child runs on while they retry, so their pauses also
  count against LeaseMarginSeconds (timing_relations.py, margin-covers-retries).
  A retrier with MaxAttempts 0 (the stop's, on Sfn.ExecutionDoesNotExistException:
  not retried) pauses 0 s.
- JitterStrategy FULL on the contention retrier, so waiters do not retry in step.

Reads statemachine/*.asl.json and the recipe in docs/modes.md.
Usage: retry_bounds.py | retry_bounds.py --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

MAX_OVERSHOOT_SECONDS = 30  # one capped pause; the acquire call itself is bounded by its 15 s timeout
TRANSIENT_BUDGET_SECONDS = 180


def load(text: str) -> dict:
    return json.loads(re.sub(r"\$\{[A-Za-z0-9_]+\}", "1", text))


def definitions() -> dict[str, dict]:
    found = {path.name: load(path.read_text()) for path in sorted(Path("statemachine").glob("*.asl.json"))}
    doc = Path("docs/modes.md").read_text()
    recipe = re.search(r"<!-- recipe:begin -->\s*```json\n(.*?)```", doc, re.S)
    if not recipe:
        raise SystemExit("docs/modes.md: no <!-- recipe:begin --> ```json ... ``` block (the recipe moved?)")
    found["recipe (docs/modes.md)"] = load(recipe.group(1))
    return found


def retriers(states: dict) -> list[tuple[str, dict]]:
    out = []
    for name, state in states.items():
        out += [(name, retrier) for retrier in state.get("Retry", [])]
        for branch in state.get("Branches", []):
            out += retriers(branch["States"])
    return out


def total_pauses(retrier: dict) -> float:
    interval, rate = retrier.get("IntervalSeconds", 1), retrier.get("BackoffRate", 2.0)
    cap = retrier.get("MaxDelaySeconds", float("inf"))
    total, pause = 0.0, float(interval)
    for _ in range(min(retrier.get("MaxAttempts", 3), 10_000)):
        total += min(pause, cap)
        pause = min(pause * rate, 1e12)  # grown past any cap: no float overflow
    return total


def problems(found: dict[str, dict]) -> list[str]:
    out = []
    for file, definition in found.items():
        for state, retrier in retriers(definition["States"]):
            where = f"{file}: {state} on {retrier['ErrorEquals']}"
            # The ASL spec: MaxDelaySeconds is > 0 (and < 31622401); 0 is no cap at all.
            if "MaxDelaySeconds" in retrier and not 0 < retrier["MaxDelaySeconds"] < 31_622_401:
                out.append(f"{where}: MaxDelaySeconds {retrier['MaxDelaySeconds']} is outside 1..31622400")
            if "LockUnavailable" in retrier["ErrorEquals"]:
                cap = retrier.get("MaxDelaySeconds")
                if cap is None or cap > MAX_OVERSHOOT_SECONDS:
                    out.append(f"{where}: pauses capped at {cap}, so a wait may overshoot MaxWaitSeconds by more than {MAX_OVERSHOOT_SECONDS} s")
                if retrier.get("JitterStrategy") != "FULL":
                    out.append(f"{where}: no full jitter, so waiters retry in step")
            elif (total := total_pauses(retrier)) > TRANSIENT_BUDGET_SECONDS:
                out.append(f"{where}: its pauses add up to {total:.0f} s, above {TRANSIENT_BUDGET_SECONDS} s")
    return out


def self_test() -> int:
    good = definitions()
    failures = 0

    def broken(change, file: str = "locked-workflow.asl.json") -> dict[str, dict]:
        copied = copy.deepcopy(good)
        change(copied[file]["States"])
        return copied

    cases = {
        "MaxDelaySeconds deleted from the wait": lambda s: s["Acquire Lock"]["Retry"][0].pop("MaxDelaySeconds"),
        "no jitter on the wait": lambda s: s["Acquire Lock"]["Retry"][0].pop("JitterStrategy"),
        "an uncapped transient retrier": lambda s: (s["Release Lock"]["Retry"][0].pop("MaxDelaySeconds"),
                                                  s["Release Lock"]["Retry"][0].update(MaxAttempts=20)),
        "MaxDelaySeconds 0 on the wait (no cap)": lambda s: s["Acquire Lock"]["Retry"][0].update(MaxDelaySeconds=0),
        "a capped transient retrier with 2000 attempts": lambda s: s["Release Lock"]["Retry"][0].update(MaxAttempts=2000),
    }
    if problems(good):
        failures += 1
        print(f"FAIL rejected the shipped definitions: {problems(good)}")
    def every_error(state: dict) -> dict:
        """The state's retrier of States.ALL (the stop's first one is the unretried ExecutionDoesNotExist)."""
        return next(r for r in state["Retry"] if r["ErrorEquals"] == ["States.ALL"])

    attach_cases = {
        "the child's stop retried 2000 times": lambda s: every_error(s["Stop Target Execution"]).update(MaxAttempts=2000),
        "the child's stop retried without a cap": lambda s: (every_error(s["Stop Target Execution"]).pop("MaxDelaySeconds"),
                                                           every_error(s["Stop Target Execution"]).update(MaxAttempts=10)),
        "ExecutionDoesNotExist of the stop retried 2000 times":
            lambda s: s["Stop Target Execution"]["Retry"][0].update(MaxAttempts=2000),
        "the read of the child's status retried without a cap":
            lambda s: (every_error(s["Describe Target Execution"]).pop("MaxDelaySeconds"),
                       every_error(s["Describe Target Execution"]).update(MaxAttempts=10)),
    }
    for name, change in attach_cases.items():
        found = problems(broken(change, "attach-existing.asl.json"))
        print(f"{'ok  ' if found else 'FAIL'} retry-bounds rejects {name}: {found[:1]}")
        failures += not found
    for name, change in cases.items():
        found = problems(broken(change))
        print(f"{'ok  ' if found else 'FAIL'} retry-bounds rejects {name}: {found[:1]}")
        failures += not found
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(definitions())
    for problem in found:
        print(problem)
    print(f"retry bounds: {len(found)} problem(s) in {len(definitions())} definitions")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
