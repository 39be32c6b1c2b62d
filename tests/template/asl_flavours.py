#!/usr/bin/env python3
"""statemachine/jsonata/X.asl.json is statemachine/X.asl.json written in JSONata.

Why Python, not a tool: it relates two files, and no ASL tool does; asl-validator
reads one definition at a time (and, at the version pinned, JSONata ones only
in part: docs/modes.md, "JSONata").

The JSONata flavour moves data differently (Arguments/Output/Assign instead of
Parameters/ResultSelector/ResultPath/OutputPath), so the files cannot be equal;
what must be equal is everything that decides what runs and when the lock is
released: for every state, recursively into Parallel branches and Map
processors,

- the same state names and types, the same StartAt;
- the same transitions: Next, End, Default, each Choice rule's Next in order;
- the same Catch (ErrorEquals and Next, in order) and Retry (ErrorEquals,
  IntervalSeconds, MaxAttempts, BackoffRate, MaxDelaySeconds, JitterStrategy,
  in order): the Catch paths after which work may still run hold the lock in
  both flavours because they go to the same states;
- the same Fail Error and Cause (a literal, or the same field of the input:
  ErrorPath "$.Error" is Error "{% $states.input.Error %}");
- the same Resource, TimeoutSeconds/HeartbeatSeconds and Wait Seconds (a literal
  or the same ${Placeholder}; a JSONPath *Path is the same field as expression).

And of the JSONata file alone: QueryLanguage JSONata at the top, and no field
that JSONata states do not allow (InputPath, Parameters, ResultSelector,
ResultPath, OutputPath, *Path, a "key.$", a Choice rule's Variable): AWS
refuses such a definition, so a half-converted state cannot stay unnoticed.

The JSONata recipe in docs/modes.md (the block between <!-- recipe-jsonata:begin -->
and <!-- recipe-jsonata:end -->) must equal jsonata/locked-workflow.asl.json,
Comments aside, as tests/e2e/40-recipe.test.mjs holds the JSONPath recipe to
its file.

Not compared: the expressions (Arguments, Output, Assign, Conditions); the
deployed tier runs both flavours on the same scenarios
(tests/deployed/test_jsonata.py).

Usage: asl_flavours.py | asl_flavours.py --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from asl_walk import load, loads, machines, without_comments, workload_branch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "statemachine"
FLAVOUR = MACHINES / "jsonata"
RETRY_FIELDS = ("ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "JitterStrategy")
# Fields of a state that JSONata does not allow (AWS: "Transforming data with
# JSONata in Step Functions"; the *Path forms become expressions).
JSONPATH_ONLY = ("InputPath", "Parameters", "ResultSelector", "ResultPath", "OutputPath", "ItemsPath",
                 "ErrorPath", "CausePath", "TimeoutSecondsPath", "HeartbeatSecondsPath", "SecondsPath",
                 "TimestampPath", "Iterator", "Result")


def as_expression(path: str) -> str:
    """A JSONPath reference to the state input, as the JSONata expression for the same field."""
    if path == "$":
        return "{% $states.input %}"
    if path.startswith("$."):
        return "{% $states.input." + path[2:] + " %}"
    if path.startswith("$$."):
        return "{% $states.context." + path[3:] + " %}"
    return path


def bound(state: dict, field: str):
    """A literal, placeholder or (JSONPath) path of a state's bound, in one form."""
    if f"{field}Path" in state:
        return as_expression(state[f"{field}Path"])
    return state.get(field)


def skeleton(state: dict) -> dict:
    """What decides what runs: the fields compared between the flavours."""
    out = {
        "Type": state.get("Type"),
        "Next": state.get("Next"),
        "End": state.get("End"),
        "Default": state.get("Default"),
        "Choices": [rule.get("Next") for rule in state.get("Choices", [])],
        "Catch": [(c.get("ErrorEquals"), c.get("Next")) for c in state.get("Catch", [])],
        "Retry": [{f: r.get(f) for f in RETRY_FIELDS} for r in state.get("Retry", [])],
        "Resource": state.get("Resource"),
        "TimeoutSeconds": bound(state, "TimeoutSeconds"),
        "HeartbeatSeconds": bound(state, "HeartbeatSeconds"),
        "Seconds": bound(state, "Seconds"),
        "Timestamp": bound(state, "Timestamp"),
        "Error": bound(state, "Error"),
        "Cause": bound(state, "Cause"),
    }
    return {k: v for k, v in out.items() if v not in (None, [])}


def differences(jsonpath: dict, jsonata: dict) -> list[str]:
    out = []
    left, right = dict(machines(jsonpath)), dict(machines(jsonata))
    for where in sorted(set(left) | set(right)):
        label = where or "(top level)"
        if where not in right or where not in left:
            out.append(f"{label}: only in the {'JSONPath' if where in left else 'JSONata'} flavour")
            continue
        a, b = left[where], right[where]
        if a.get("StartAt") != b.get("StartAt"):
            out.append(f"{label}: StartAt {a.get('StartAt')!r} vs {b.get('StartAt')!r}")
        sa, sb = a.get("States", {}), b.get("States", {})
        for name in sorted(set(sa) | set(sb)):
            if name not in sb or name not in sa:
                out.append(f"{label}: state {name!r} only in the {'JSONPath' if name in sa else 'JSONata'} flavour")
                continue
            ka, kb = skeleton(sa[name]), skeleton(sb[name])
            for field in sorted(set(ka) | set(kb)):
                if ka.get(field) != kb.get(field):
                    out.append(f"{label}: {name!r} {field}: {ka.get(field)!r} (JSONPath) vs {kb.get(field)!r} (JSONata)")
    return out


def jsonata_problems(jsonata: dict) -> list[str]:
    out = []
    if jsonata.get("QueryLanguage") != "JSONata":
        out.append(f"QueryLanguage is {jsonata.get('QueryLanguage')!r}, not 'JSONata'")
    for where, machine in machines(jsonata):
        for name, state in machine.get("States", {}).items():
            if state.get("QueryLanguage", "JSONata") != "JSONata":
                out.append(f"{where}/{name}: QueryLanguage {state['QueryLanguage']!r}")
            for field in JSONPATH_ONLY:
                if field in state:
                    out.append(f"{where}/{name}: {field} is not allowed in a JSONata state")
            for catcher in state.get("Catch", []):
                if "ResultPath" in catcher:
                    out.append(f"{where}/{name}: a Catch with ResultPath (JSONata: Output/Assign)")
            for rule in state.get("Choices", []):
                if "Condition" not in rule:
                    out.append(f"{where}/{name}: a Choice rule without Condition (JSONata: no Variable)")
            stack = [state.get(k) for k in ("Arguments", "Output", "Assign", "ItemSelector")]
            while stack:
                value = stack.pop()
                if isinstance(value, dict):
                    out += [f"{where}/{name}: key {k!r} (JSONata: no .$ keys)" for k in value if k.endswith(".$")]
                    stack += value.values()
                elif isinstance(value, list):
                    stack += value
    return out


def recipe_problems(doc: str, jsonata: dict) -> list[str]:
    block = re.search(r"<!-- recipe-jsonata:begin -->\s*```json\n(.*?)```\s*<!-- recipe-jsonata:end -->", doc, re.S)
    if not block:
        return ["docs/modes.md: no <!-- recipe-jsonata:begin --> ```json ... ``` <!-- recipe-jsonata:end --> block"]
    try:
        recipe = loads(block.group(1))
    except json.JSONDecodeError as error:
        return [f"docs/modes.md: the JSONata recipe is not JSON: {error}"]
    found = jsonata_problems(recipe) + differences(recipe, jsonata)
    if not found and without_comments(recipe) != without_comments(jsonata):
        found.append("differs from statemachine/jsonata/locked-workflow.asl.json in its expressions")
    return [f"docs/modes.md JSONata recipe: {p}" for p in found]


def pairs() -> list[tuple[str, list[str]]]:
    """Each definition's problems, and a JSONata file without a JSONPath one (or the reverse)."""
    names = sorted({p.name for p in MACHINES.glob("*.asl.json")} | {p.name for p in FLAVOUR.glob("*.asl.json")})
    found = []
    for name in names:
        if not (MACHINES / name).exists() or not (FLAVOUR / name).exists():
            found.append((name, [f"no {'JSONata' if (MACHINES / name).exists() else 'JSONPath'} flavour"]))
            continue
        jsonata = load(FLAVOUR / name)
        found.append((name, jsonata_problems(jsonata) + differences(load(MACHINES / name), jsonata)))
    doc = (ROOT / "docs" / "modes.md").read_text()
    found.append(("docs/modes.md", recipe_problems(doc, load(FLAVOUR / "locked-workflow.asl.json"))))
    return found


def self_test() -> int:
    failures = 0
    for name, found in pairs():
        if found:
            print(f"FAIL rejects the shipped {name}: {found[:2]}")
            failures += 1
    locked = load(MACHINES / "locked-workflow.asl.json")
    queued = load(MACHINES / "queued-workflow.asl.json")
    attach = load(MACHINES / "attach-existing.asl.json")
    # Each drift planted in a copy of the JSONata flavour; each must be refused.
    cases = {
        "a renamed Fail error": (queued, "queued-workflow.asl.json",
                                 lambda s: s["States"]["Fail With Lock Wait Timeout"].update(Error="LockWaitTimedOut")),
        "a renamed error in a Catch": (locked, "locked-workflow.asl.json",
                                       lambda s: s["States"]["Acquire Lock"]["Catch"][0]["ErrorEquals"].__setitem__(
                                           0, "LockStoreDown")),
        "a dropped Catch (the held path)": (locked, "locked-workflow.asl.json",
                                            lambda s: s["States"]["Run Workload Under Lock"]["Catch"].pop(0)),
        "a changed Next": (locked, "locked-workflow.asl.json",
                           lambda s: s["States"]["Wait For Workload To Stop"].update(Next="Release Lock")),
        "a may-run error released at once (a Catch's Next, in a branch)": (
            locked, "locked-workflow.asl.json",
            lambda s: workload_branch(s)["Run Workload"]["Catch"][0].update(Next="Workload Ended With Error")),
        "the Catch order swapped in a branch": (locked, "locked-workflow.asl.json",
                                               lambda s: workload_branch(s)["Run Workload"]["Catch"].reverse()),
        "a Choice's routes swapped": (locked, "locked-workflow.asl.json",
                                      lambda s: (s["States"]["Check Whether Workload Failed"]["Choices"][0].update(
                                          Next="Release Lock"),
                                          s["States"]["Check Whether Workload Failed"].update(
                                              Default="Take Workload Error"))),
        "a retrier's MaxAttempts": (locked, "locked-workflow.asl.json",
                                    lambda s: s["States"]["Release Lock"]["Retry"][0].update(MaxAttempts=1)),
        "a retrier without its jitter": (locked, "locked-workflow.asl.json",
                                         lambda s: s["States"]["Acquire Lock"]["Retry"][0].pop("JitterStrategy")),
        "the workload's TimeoutSeconds": (
            locked, "locked-workflow.asl.json",
            lambda s: workload_branch(s)["Run Workload"].update(TimeoutSeconds="${MaxWaitSeconds}")),
        "the queue's wait unbounded": (queued, "queued-workflow.asl.json",
                                       lambda s: s["States"]["Acquire Lock"].pop("TimeoutSeconds")),
        "the held Wait's Seconds": (locked, "locked-workflow.asl.json",
                                    lambda s: s["States"]["Wait For Workload To Stop"].update(Seconds=1)),
        "a plain invoke for the callback": (queued, "queued-workflow.asl.json",
                                            lambda s: s["States"]["Acquire Lock"].update(
                                                Resource="arn:${Partition}:states:::lambda:invoke")),
        "a renamed state": (locked, "locked-workflow.asl.json",
                            lambda s: s["States"].__setitem__("Release The Lock", s["States"].pop("Release Lock"))),
        "a Fail re-raising another field": (locked, "locked-workflow.asl.json",
                                            lambda s: s["States"]["Fail With Original Error"].update(
                                                Cause="{% $states.input.Error %}")),
        "the attach child's stop skipped": (attach, "attach-existing.asl.json",
                                            lambda s: s["States"]["Run Target State Machine"]["Catch"][1].update(
                                                Next="Wait For Target To Stop")),
        "a ResultPath left in a JSONata state": (locked, "locked-workflow.asl.json",
                                                 lambda s: s["States"]["Release Lock"].update(ResultPath=None)),
        "a Catch with ResultPath": (locked, "locked-workflow.asl.json",
                                    lambda s: s["States"]["Release Lock"]["Catch"][0].update(ResultPath=None)),
        "a .$ key in Arguments": (locked, "locked-workflow.asl.json",
                                  lambda s: s["States"]["Release Lock"]["Arguments"]["Payload"].update(
                                      {"owner.$": "$$.Execution.Id"})),
        "no QueryLanguage": (locked, "locked-workflow.asl.json", lambda s: s.pop("QueryLanguage")),
    }
    for label, (jsonpath, name, change) in cases.items():
        broken = load(FLAVOUR / name)
        change(broken)
        found = jsonata_problems(broken) + differences(jsonpath, broken)
        print(f"{'ok  ' if found else 'FAIL'} asl-flavours rejects {label}: {str(found[:1])[:160]}")
        failures += not found
    doc = (ROOT / "docs" / "modes.md").read_text()
    shipped = load(FLAVOUR / "locked-workflow.asl.json")
    for label, old, new in (("the recipe's held Wait skipped", '"Next": "Release Lock After Failure"', '"Next": "Release Lock"'),
                            ("the recipe's owner from the input", "{% $states.context.Execution.Id %}",
                             "{% $states.input.owner %}"),
                            ("the recipe's markers gone", "<!-- recipe-jsonata:begin -->", "")):
        head, marker, block = doc.partition("<!-- recipe-jsonata:begin -->")  # in the JSONata block, not before it
        found = recipe_problems(head + (marker + block).replace(old, new, 1), shipped)
        print(f"{'ok  ' if found else 'FAIL'} asl-flavours rejects {label}: {str(found[:1])[:160]}")
        failures += not found
    # And the other way: the JSONPath file changed alone is drift too.
    changed = copy.deepcopy(locked)
    changed["States"]["Release Lock After Failure"]["Retry"][0]["MaxAttempts"] = 2
    found = differences(changed, load(FLAVOUR / "locked-workflow.asl.json"))
    print(f"{'ok  ' if found else 'FAIL'} asl-flavours rejects a JSONPath retrier changed alone: {found[:1]}")
    failures += not found
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    total = 0
    for name, found in pairs():
        for problem in found:
            print(f"asl_flavours: {name}: {problem}")
        against = "the JSONata recipe" if name.endswith(".md") else f"jsonata/{name} vs {name}"
        print(f"asl_flavours: {against}: {len(found)} problem(s)")
        total += len(found)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
