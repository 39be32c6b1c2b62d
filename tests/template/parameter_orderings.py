"""The orderings between template.yaml's defaults and ranges that keep the lock safe.

CloudFormation Rules cannot compare numbers, so where the template cannot derive
one value from another, this check holds the orderings between its defaults and
ranges (issue 8, part 1; DESIGN.md, "Ends without a release"):

sample-timeout-derived    the sample workload function's Timeout is !Ref
                          WorkloadTimeoutSeconds, and every Task that invokes
                          ${WorkloadFunctionArn} has "TimeoutSeconds":
                          ${WorkloadTimeoutSeconds}, substituted by !Ref
                          WorkloadTimeoutSeconds: the sample never runs on after
                          its Task timed out but for its start-up (Lambda's Init,
                          up to 10 s), which WorkloadMaxRunSeconds' minimum, the
                          held path, covers, whatever WorkloadTimeoutSeconds is.
workload-timeout-range    WorkloadTimeoutSeconds fits one Lambda invocation (1..900).
max-run-covers-workload   WorkloadMaxRunSeconds' default is at least every timeout the
                          sample function can have, and its range reaches 900 (any
                          Lambda function's longest run).
lease-cap                 MaxLeaseSeconds admits "" and exactly the integers
                          1..31536000 (the contract's longest lease, limits.max_lease_seconds
                          of contract/code-facts.json); acquire-lock's
                          MAX_LEASE_SECONDS is absent (AWS::NoValue) when it is "",
                          so that the leases `sfn-lock wrap` output asks for (from
                          the user's own timeouts) are granted on a default stack,
                          and is !Ref MaxLeaseSeconds when it is set. The deploy
                          cannot compare a set cap with the stack's own leases, so
                          its Description names every parameter those leases add up
                          (read from the definitions' leaseSeconds.$) and `sfn-lock
                          wrap`, which prints the value its output needs.
cleanup-delay             CleanupDelaySeconds is the cleanup queue's DelaySeconds,
                          within SQS's 0..900, and its minimum exceeds the acquire
                          function's Timeout, so that an acquire in flight when the
                          execution ended has landed before the sweep looks.
defaults-in-range         every parameter above has its Default within its range.
lock-limit-integers       LockLimit admits exactly the integers 1..1000 that acquire-lock
                          accepts: a Number parameter would also take 2.5, deploy, and
                          then fail every execution with InvalidLockRequest.

The leases themselves (each definition's lease is its workload's bound + its held
path + LeaseMarginSeconds, within the contract for every accepted value), the
absence of an execution timeout and the queue's wait bound are
tests/template/timing_relations.py's.

Usage: parameter_orderings.py template.yaml | parameter_orderings.py --self-test
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import code_facts  # noqa: E402
# A definition's text as data (timing_relations imports parse_definition from here).
from asl_walk import loads as parse_definition  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAMBDA_MAX_TIMEOUT_SECONDS = 900
SQS_MAX_DELAY_SECONDS = 900
CHECKED_PARAMETERS = ["WorkloadTimeoutSeconds", "TargetTimeoutSeconds", "WorkloadMaxRunSeconds",
                      "LeaseMarginSeconds", "MaxWaitSeconds", "CleanupDelaySeconds"]


def contract_max_lease() -> int:
    """MAX_LEASE_SECONDS, the longest lease acquire-lock accepts when its environment
    sets no cap, from contract/code-facts.json (kept equal to the code by a Rust test)."""
    try:
        return int(code_facts.get(code_facts.load(), "limits", "max_lease_seconds"))
    except code_facts.FactsError as error:
        raise SystemExit(f"parameter_orderings: {error}") from None


ACQUIRE_MAX_LEASE_SECONDS = contract_max_lease()  # 31536000: acquire-lock's leaseSeconds rule (docs/contract.md)

Problem = tuple[str, str]  # (rule, message)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _range(template: dict, name: str) -> tuple[float | None, float | None, float | None]:
    spec = template.get("Parameters", {}).get(name, {}) or {}
    return _number(spec.get("MinValue")), _number(spec.get("Default")), _number(spec.get("MaxValue"))


def _properties(template: dict, resource: str) -> dict:
    return (template.get("Resources", {}).get(resource, {}) or {}).get("Properties", {}) or {}


# -- the lease expression ---------------------------------------------------------------
_TOKEN = re.compile(r"\s*(States\.MathAdd\(|\$\{[A-Za-z0-9_]+\}|-?\d+|,|\))")


def lease_terms(expression: str) -> list[str]:
    """The summands of a (nested) States.MathAdd expression: placeholder names, or
    numbers as text. ValueError if it is anything else."""
    tokens, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if not match:
            raise ValueError(f"cannot read {expression!r} at {position}")
        tokens.append(match.group(1))
        position = match.end()

    def parse(i: int) -> tuple[list[str], int]:
        if i >= len(tokens):
            raise ValueError(f"{expression!r} ends early")
        token = tokens[i]
        if token == "States.MathAdd(":
            left, i = parse(i + 1)
            if i >= len(tokens) or tokens[i] != ",":
                raise ValueError(f"{expression!r}: States.MathAdd needs two arguments")
            right, i = parse(i + 1)
            if i >= len(tokens) or tokens[i] != ")":
                raise ValueError(f"{expression!r}: unclosed States.MathAdd")
            return left + right, i + 1
        if token.startswith("${"):
            return [token[2:-1]], i + 1
        if re.fullmatch(r"-?\d+", token):
            return [token], i + 1
        raise ValueError(f"{expression!r}: unexpected {token!r}")

    terms, end = parse(0)
    if end != len(tokens):
        raise ValueError(f"{expression!r}: text after the expression")
    return terms


# -- the rules --------------------------------------------------------------------------
def all_states(states: dict) -> dict[str, dict]:
    """Every state, those inside Parallel branches and Map iterators too."""
    found = {}
    for name, state in (states or {}).items():
        found[name] = state
        for branch in state.get("Branches", []) or []:
            found.update(all_states(branch.get("States", {})))
        for key in ("Iterator", "ItemProcessor"):
            if isinstance(state.get(key), dict):
                found.update(all_states(state[key].get("States", {})))
    return found


# Lambda's Init phase, outside the function's timeout: an invocation may start this
# long after its Task did, so it may end this long after its Task timed out.
LAMBDA_INIT_SECONDS = 10


def sample_timeout_derived(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    timeout = _properties(template, "SampleWorkloadFunction").get("Timeout")
    if timeout != {"Ref": "WorkloadTimeoutSeconds"}:
        found.append(f"SampleWorkloadFunction's Timeout is {timeout!r}, not !Ref WorkloadTimeoutSeconds")
    tasks = 0
    for name, properties in _state_machines(template).items():
        try:
            definition = parse_definition(definitions(properties.get("DefinitionUri")))
        except (OSError, TypeError, ValueError):
            continue  # asl_substitutions and timing_relations report an unreadable definition
        substitutions = properties.get("DefinitionSubstitutions", {}) or {}
        for state_name, state in all_states(definition.get("States", {})).items():
            if (state.get("Parameters", {}) or {}).get("FunctionName") != "${WorkloadFunctionArn}":
                continue
            tasks += 1
            bound = state.get("TimeoutSeconds")
            if bound != "${WorkloadTimeoutSeconds}" or substitutions.get("WorkloadTimeoutSeconds") != {"Ref": "WorkloadTimeoutSeconds"}:
                found.append(f"{name}: {state_name}'s TimeoutSeconds is {bound!r} (substituted by "
                             f"{substitutions.get('WorkloadTimeoutSeconds')!r}), not WorkloadTimeoutSeconds, the "
                             "sample function's own Timeout: the sample may run on after its Task timed out")
    if not tasks:
        found.append("no state machine invokes ${WorkloadFunctionArn}")
    low = _range(template, "WorkloadMaxRunSeconds")[0]
    if low is None or low < LAMBDA_INIT_SECONDS:
        found.append(f"WorkloadMaxRunSeconds may be {low} s, less than the {LAMBDA_INIT_SECONDS} s by which the sample "
                     "may outlive its timed-out Task (its start-up): the held path would not cover it")
    return found


def workload_timeout_range(template: dict, definitions: Callable[[str], str]) -> list[str]:
    low, default, high = _range(template, "WorkloadTimeoutSeconds")
    if low is None or high is None or low < 1 or high > LAMBDA_MAX_TIMEOUT_SECONDS:
        return [f"WorkloadTimeoutSeconds ranges {low}..{high}, not within one Lambda invocation (1..900)"]
    return []


def _sample_timeouts(template: dict) -> float | None:
    """The longest Timeout the sample function can have."""
    timeout = _properties(template, "SampleWorkloadFunction").get("Timeout")
    if isinstance(timeout, dict) and set(timeout) == {"Ref"}:
        return _range(template, timeout["Ref"])[2]
    return _number(timeout)


def max_run_covers_workload(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    _, default, high = _range(template, "WorkloadMaxRunSeconds")
    longest = _sample_timeouts(template)
    if default is None or longest is None or default < longest:
        found.append(f"WorkloadMaxRunSeconds' default {default} is below the sample function's longest timeout {longest}")
    if high is None or high < LAMBDA_MAX_TIMEOUT_SECONDS:
        found.append(f"WorkloadMaxRunSeconds cannot reach {LAMBDA_MAX_TIMEOUT_SECONDS} s (MaxValue {high})")
    return found


def _state_machines(template: dict) -> dict[str, dict]:
    return {
        name: resource.get("Properties", {}) or {}
        for name, resource in (template.get("Resources", {}) or {}).items()
        if resource.get("Type") in ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine")
    }


def stack_lease_terms(template: dict, definitions: Callable[[str], str]) -> set[str]:
    """The placeholders that the stack's own leaseSeconds.$ expressions add up."""
    terms: set[str] = set()
    for properties in _state_machines(template).values():
        try:
            text = definitions(properties.get("DefinitionUri"))
        except (OSError, TypeError):
            continue
        for expression in re.findall(r'"leaseSeconds\.\$":\s*"([^"]*)"', text):
            try:
                terms |= {term for term in lease_terms(expression) if not re.fullmatch(r"-?\d+", term)}
            except ValueError:
                continue  # timing_relations reports it
    return terms


def _holds(template: dict, condition: Any, parameter: str, value: str) -> bool | None:
    """Whether a condition holds when the String parameter `parameter` is `value`."""
    if isinstance(condition, dict) and list(condition) == ["Condition"]:
        return _holds(template, (template.get("Conditions", {}) or {}).get(condition["Condition"]), parameter, value)
    if isinstance(condition, dict) and list(condition) == ["Fn::Not"]:
        inner = _holds(template, condition["Fn::Not"][0], parameter, value)
        return None if inner is None else not inner
    if isinstance(condition, dict) and list(condition) == ["Fn::Equals"]:
        sides = [value if side == {"Ref": parameter} else side for side in condition["Fn::Equals"]]
        if all(isinstance(side, (str, int, float)) for side in sides):
            return str(sides[0]) == str(sides[1])
    return None


def _environment_value(template: dict, expression: Any, parameter: str, value: str) -> Any:
    """The value an Environment variable takes when `parameter` is `value` (a !If on a
    condition of it decided); {"Ref": "AWS::NoValue"}: the variable is not set."""
    if isinstance(expression, dict) and list(expression) == ["Fn::If"] and len(expression["Fn::If"]) == 3:
        condition, yes, no = expression["Fn::If"]
        holds = _holds(template, (template.get("Conditions", {}) or {}).get(condition), parameter, value)
        if holds is None:
            return {"cannot tell": expression}
        return _environment_value(template, yes if holds else no, parameter, value)
    return expression


UNSET = {"Ref": "AWS::NoValue"}


def lease_cap(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    parameter = template.get("Parameters", {}).get("MaxLeaseSeconds")
    if parameter is None or parameter.get("Type") != "String" or parameter.get("Default") != "":
        return [f"MaxLeaseSeconds is {parameter!r}, not a String parameter defaulting to \"\" (no cap)"]
    pattern = parameter.get("AllowedPattern", "")
    accepted = ["", "1", "90", "4800", "999999", str(ACQUIRE_MAX_LEASE_SECONDS)]
    refused = ["0", str(ACQUIRE_MAX_LEASE_SECONDS + 1), "99999999", "2.5", "01", "-1", " 5", "1e2", "60+30", "none"]
    found += [f"MaxLeaseSeconds' AllowedPattern {pattern!r} refuses {value!r}" for value in accepted if not re.fullmatch(pattern, value)]
    found += [f"MaxLeaseSeconds' AllowedPattern {pattern!r} accepts {value!r}" for value in refused if re.fullmatch(pattern, value)]
    variables = (_properties(template, "AcquireLockFunction").get("Environment", {}) or {}).get("Variables", {}) or {}
    if "MAX_LEASE_SECONDS" not in variables:
        return found + ["acquire-lock's Environment has no MAX_LEASE_SECONDS: a set MaxLeaseSeconds never reaches it"]
    cap = variables["MAX_LEASE_SECONDS"]
    unset = _environment_value(template, cap, "MaxLeaseSeconds", "")
    if unset != UNSET:
        found.append(f"with MaxLeaseSeconds empty, acquire-lock's MAX_LEASE_SECONDS is {unset!r}, not unset "
                     "(!Ref AWS::NoValue): a default stack would refuse the longer leases of `sfn-lock wrap` output")
    for value in ("1", "4800", str(ACQUIRE_MAX_LEASE_SECONDS)):
        given = _environment_value(template, cap, "MaxLeaseSeconds", value)
        if given != {"Ref": "MaxLeaseSeconds"}:
            found.append(f"with MaxLeaseSeconds {value}, acquire-lock's MAX_LEASE_SECONDS is {given!r}, not !Ref MaxLeaseSeconds")
            break
    description = " ".join(str(parameter.get("Description", "")).split())
    needed = sorted(stack_lease_terms(template, definitions))
    if not needed:
        found.append("no leaseSeconds.$ in the stack's definitions: cannot tell what a set cap must cover")
    missing = [term for term in needed if term not in description]
    if missing:
        found.append(f"MaxLeaseSeconds' Description does not name {', '.join(missing)}: a set cap must cover the "
                     f"stack's own leases, which add up {', '.join(needed)}, and the deploy cannot compare them")
    if "sfn-lock wrap" not in description:
        found.append("MaxLeaseSeconds' Description does not point at `sfn-lock wrap`, which prints the cap its output needs")
    return found


def cleanup_delay(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    low, _, high = _range(template, "CleanupDelaySeconds")
    if low is None or high is None or low < 0 or high > SQS_MAX_DELAY_SECONDS:
        found.append(f"CleanupDelaySeconds ranges {low}..{high}, outside SQS's 0..{SQS_MAX_DELAY_SECONDS}")
    timeout = _number(_properties(template, "AcquireLockFunction").get("Timeout"))
    if low is None or timeout is None or low <= timeout:
        found.append(f"CleanupDelaySeconds may be {low} s, not longer than the acquire function's {timeout} s timeout")
    queue_delay = _properties(template, "CleanupQueue").get("DelaySeconds")
    if queue_delay != {"Ref": "CleanupDelaySeconds"}:
        found.append(f"the cleanup queue's DelaySeconds is {queue_delay!r}, not CleanupDelaySeconds")
    return found


# Lambda's Init phase (LAMBDA_INIT_SECONDS, outside the function timeout) plus the
# acquire function's Timeout: an acquire in flight when its execution ended has landed
# by then, and its grant time is at most that after the end (the sweep's
# LATE_ACQUIRE_SECONDS, limits.late_acquire_seconds of contract/code-facts.json).
def late_acquire_seconds() -> int:
    try:
        return int(code_facts.get(code_facts.load(), "limits", "late_acquire_seconds"))
    except code_facts.FactsError as error:
        raise SystemExit(f"parameter_orderings: {error}") from None


LATE_ACQUIRE_SECONDS = late_acquire_seconds()


def sweep_grace_covers_late_acquire(template: dict, definitions: Callable[[str], str]) -> list[str]:
    low, _, _ = _range(template, "WorkloadMaxRunSeconds")
    timeout = _number(_properties(template, "AcquireLockFunction").get("Timeout"))
    if timeout is not None and LAMBDA_INIT_SECONDS + timeout > late_acquire_seconds():
        return [f"an acquire may land {LAMBDA_INIT_SECONDS} s Init + {timeout} s after the execution ended, "
                f"later than the sweep's LATE_ACQUIRE_SECONDS ({late_acquire_seconds()} s) allows"]
    if low is None or timeout is None or low < max(LATE_ACQUIRE_SECONDS, LAMBDA_INIT_SECONDS + timeout):
        return [f"WorkloadMaxRunSeconds (the sweep's grace) may be {low} s, less than a late acquire "
                f"needs ({LAMBDA_INIT_SECONDS} s Init + the acquire function's {timeout} s, and {LATE_ACQUIRE_SECONDS} s)"]
    return []


def defaults_in_range(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    for name in CHECKED_PARAMETERS:
        low, default, high = _range(template, name)
        if None in (low, default, high) or not low <= default <= high:
            found.append(f"{name}: Default {default} is not within {low}..{high}")
    return found


LOCK_LIMIT_MAX = 1000  # acquire-lock's `limit` rule (docs/contract.md)


def lock_limit_integers(template: dict, definitions: Callable[[str], str]) -> list[str]:
    parameter = template.get("Parameters", {}).get("LockLimit")
    if parameter is None:
        return ["no LockLimit parameter"]
    if parameter.get("Type") != "String":
        return [f"LockLimit is a {parameter.get('Type')}: CloudFormation also accepts 2.5 for it; "
                "use a String with an AllowedPattern of the integers 1..1000"]
    pattern = parameter.get("AllowedPattern", "")
    accepted = [str(n) for n in range(1, LOCK_LIMIT_MAX + 1)]
    refused = ["0", str(LOCK_LIMIT_MAX + 1), "2.5", "2.0", "01", "-1", "", " 5", "1e2"]
    found = [f"LockLimit's AllowedPattern {pattern!r} refuses {value!r}"
             for value in accepted if not re.fullmatch(pattern, value)][:3]
    found += [f"LockLimit's AllowedPattern {pattern!r} accepts {value!r}"
              for value in refused if re.fullmatch(pattern, value)]
    if not re.fullmatch(pattern, str(parameter.get("Default"))):
        found.append(f"LockLimit's Default {parameter.get('Default')!r} is outside its pattern")
    return found


RULES: dict[str, Callable[[dict, Callable[[str], str]], list[str]]] = {
    "sample-timeout-derived": sample_timeout_derived,
    "workload-timeout-range": workload_timeout_range,
    "max-run-covers-workload": max_run_covers_workload,
    "lease-cap": lease_cap,
    "cleanup-delay": cleanup_delay,
    "sweep-grace-covers-late-acquire": sweep_grace_covers_late_acquire,
    "defaults-in-range": defaults_in_range,
    "lock-limit-integers": lock_limit_integers,
}


def problems(template: dict, definitions: Callable[[str], str]) -> list[Problem]:
    return [(rule, message) for rule, check in RULES.items() for message in check(template, definitions)]


# -- self-test --------------------------------------------------------------------------
GOOD_ASL = """{
  "StartAt": "Acquire Lock",
  "States": {"Acquire Lock": {"Type": "Task", "Parameters": {"Payload": {
    "leaseSeconds.$": "States.MathAdd(States.MathAdd(${WorkloadTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"
  }}, "Next": "Run Workload"},
  "Run Workload": {"Type": "Task", "Parameters": {"FunctionName": "${WorkloadFunctionArn}"},
    "TimeoutSeconds": ${WorkloadTimeoutSeconds}, "End": true}}
}"""
ATTACHED_ASL = """{
  "StartAt": "Acquire Lock",
  "States": {"Acquire Lock": {"Type": "Task", "Parameters": {"Payload": {
    "leaseSeconds.$": "States.MathAdd(States.MathAdd(${TargetTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"
  }}, "End": true}}
}"""
_SUBSTITUTIONS = {term: {"Ref": term} for term in ("WorkloadTimeoutSeconds", "WorkloadMaxRunSeconds", "LeaseMarginSeconds")}
_MAX_LEASE_PATTERN = "^$|^([1-9][0-9]{0,6}|[12][0-9]{7}|30[0-9]{6}|31[0-4][0-9]{5}|315[0-2][0-9]{4}|3153[0-5][0-9]{3}|31536000)$"
_CAP = "Resources/AcquireLockFunction/Properties/Environment/Variables/MAX_LEASE_SECONDS"
_CAP_DESCRIPTION = ("Empty: no cap. Set, it must cover `sfn-lock wrap` output's leases and the stack's own: "
                    "max(WorkloadTimeoutSeconds, TargetTimeoutSeconds) + WorkloadMaxRunSeconds + LeaseMarginSeconds.")
GOOD_TEMPLATE: dict[str, Any] = {
    "Parameters": {
        "LeaseMarginSeconds": {"Type": "Number", "Default": 300, "MinValue": 120, "MaxValue": 86400},
        "WorkloadTimeoutSeconds": {"Type": "Number", "Default": 300, "MinValue": 1, "MaxValue": 900},
        "TargetTimeoutSeconds": {"Type": "Number", "Default": 3600, "MinValue": 1, "MaxValue": 31363200},
        "WorkloadMaxRunSeconds": {"Type": "Number", "Default": 900, "MinValue": 30, "MaxValue": 86400},
        "CleanupDelaySeconds": {"Type": "Number", "Default": 900, "MinValue": 20, "MaxValue": 900},
        "LockLimit": {"Type": "String", "Default": "1", "AllowedPattern": "^([1-9][0-9]{0,2}|1000)$"},
        "MaxWaitSeconds": {"Type": "Number", "Default": 3600, "MinValue": 0, "MaxValue": 36000},
        "MaxLeaseSeconds": {"Type": "String", "Default": "", "AllowedPattern": _MAX_LEASE_PATTERN,
                            "Description": _CAP_DESCRIPTION},
    },
    "Conditions": {"HasMaxLease": {"Fn::Not": [{"Fn::Equals": [{"Ref": "MaxLeaseSeconds"}, ""]}]}},
    "Resources": {
        "AcquireLockFunction": {"Type": "AWS::Serverless::Function", "Properties": {"Timeout": 18, "Environment": {"Variables": {
            "MAX_LEASE_SECONDS": {"Fn::If": ["HasMaxLease", {"Ref": "MaxLeaseSeconds"}, {"Ref": "AWS::NoValue"}]}}}}},
        "SampleWorkloadFunction": {"Type": "AWS::Serverless::Function", "Properties": {"Timeout": {"Ref": "WorkloadTimeoutSeconds"}}},
        "CleanupQueue": {"Type": "AWS::SQS::Queue", "Properties": {"DelaySeconds": {"Ref": "CleanupDelaySeconds"}}},
        "Locked": {"Type": "AWS::Serverless::StateMachine", "Properties": {"DefinitionUri": "locked.asl.json",
                                                                           "DefinitionSubstitutions": dict(_SUBSTITUTIONS)}},
        "Attached": {"Type": "AWS::Serverless::StateMachine", "Properties": {"DefinitionUri": "attached.asl.json", "DefinitionSubstitutions": {
            "TargetTimeoutSeconds": {"Ref": "TargetTimeoutSeconds"}, "WorkloadMaxRunSeconds": {"Ref": "WorkloadMaxRunSeconds"},
            "LeaseMarginSeconds": {"Ref": "LeaseMarginSeconds"}}}},
    },
}


def _broken(change: Callable[[dict], None]) -> dict:
    template = copy.deepcopy(GOOD_TEMPLATE)
    change(template)
    return template


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        *parents, last = path.split("/")
        node = template
        for key in parents:
            node = node[key]
        node[last] = value
    return change


def _asl(locked: str = GOOD_ASL, attached: str = ATTACHED_ASL) -> Callable[[str], str]:
    return lambda uri: attached if uri == "attached.asl.json" else locked


# rule -> [(label, template, definitions)], each of which that rule must reject.
SELF_TEST_CASES: dict[str, list[tuple[str, dict, Callable[[str], str]]]] = {
    "sample-timeout-derived": [
        ("sample Timeout a fixed 900 (longer than its Task)", _broken(_set("Resources/SampleWorkloadFunction/Properties/Timeout", 900)), _asl()),
        ("the workload Task bounded by WorkloadMaxRunSeconds, not the sample's Timeout", GOOD_TEMPLATE,
         _asl(GOOD_ASL.replace('"TimeoutSeconds": ${WorkloadTimeoutSeconds}', '"TimeoutSeconds": ${WorkloadMaxRunSeconds}'))),
        ("the workload Task without TimeoutSeconds", GOOD_TEMPLATE,
         _asl(GOOD_ASL.replace('"TimeoutSeconds": ${WorkloadTimeoutSeconds}, ', ''))),
        ("WorkloadTimeoutSeconds substituted by a fixed 900", _broken(_set("Resources/Locked/Properties/DefinitionSubstitutions/WorkloadTimeoutSeconds", 900)), _asl()),
        ("WorkloadMaxRunSeconds down to 5 s, below the sample's start-up", _broken(_set("Parameters/WorkloadMaxRunSeconds/MinValue", 5)), _asl()),
    ],
    "workload-timeout-range": [
        ("WorkloadTimeoutSeconds up to 3600", _broken(_set("Parameters/WorkloadTimeoutSeconds/MaxValue", 3600)), _asl()),
        ("WorkloadTimeoutSeconds down to 0", _broken(_set("Parameters/WorkloadTimeoutSeconds/MinValue", 0)), _asl()),
    ],
    "max-run-covers-workload": [
        ("WorkloadMaxRunSeconds default 300 below a 900 s sample", _broken(_set("Parameters/WorkloadMaxRunSeconds/Default", 300)), _asl()),
        ("WorkloadMaxRunSeconds capped at 600", _broken(_set("Parameters/WorkloadMaxRunSeconds/MaxValue", 600)), _asl()),
    ],
    "lease-cap": [
        ("no MaxLeaseSeconds parameter", _broken(lambda t: t["Parameters"].pop("MaxLeaseSeconds")), _asl()),
        ("a pattern that takes 0", _broken(_set("Parameters/MaxLeaseSeconds/AllowedPattern", "^$|^[0-9]{1,8}$")), _asl()),
        ("a pattern that refuses one year", _broken(_set("Parameters/MaxLeaseSeconds/AllowedPattern", "^$|^[1-9][0-9]{0,6}$")), _asl()),
        ("no MAX_LEASE_SECONDS at all (a set cap never arrives)",
         _broken(lambda t: t["Resources"]["AcquireLockFunction"]["Properties"].pop("Environment")), _asl()),
        ("the old default: the stack's own lease as the cap (refuses wrap output's longer leases)", _broken(_set(_CAP, {"Fn::If": [
            "HasMaxLease", {"Ref": "MaxLeaseSeconds"},
            {"Fn::Sub": "${WorkloadTimeoutSeconds}+${WorkloadMaxRunSeconds}+${LeaseMarginSeconds}"}]})), _asl()),
        ("a fixed cap of 3600", _broken(_set(_CAP, "3600")), _asl()),
        ("an empty MAX_LEASE_SECONDS, which acquire-lock refuses to start with", _broken(_set(_CAP, {"Fn::If": [
            "HasMaxLease", {"Ref": "MaxLeaseSeconds"}, ""]})), _asl()),
        ("the !If's branches swapped", _broken(_set(_CAP, {"Fn::If": [
            "HasMaxLease", {"Ref": "AWS::NoValue"}, {"Ref": "MaxLeaseSeconds"}]})), _asl()),
        ("capping only when MaxLeaseSeconds is 0", _broken(_set("Conditions/HasMaxLease", {"Fn::Equals": [{"Ref": "MaxLeaseSeconds"}, "0"]})), _asl()),
        ("a Description that forgets the attach variant's TargetTimeoutSeconds", _broken(_set(
            "Parameters/MaxLeaseSeconds/Description", _CAP_DESCRIPTION.replace(", TargetTimeoutSeconds", ""))), _asl()),
        ("a Description that does not point at sfn-lock wrap", _broken(_set(
            "Parameters/MaxLeaseSeconds/Description", _CAP_DESCRIPTION.replace("`sfn-lock wrap` output's", "other"))), _asl()),
    ],
    "cleanup-delay": [
        ("delay minimum 10 s, not above the acquire timeout", _broken(_set("Parameters/CleanupDelaySeconds/MinValue", 10)), _asl()),
        ("delay up to 3600 s, beyond SQS", _broken(_set("Parameters/CleanupDelaySeconds/MaxValue", 3600)), _asl()),
        ("queue not delayed by CleanupDelaySeconds", _broken(_set("Resources/CleanupQueue/Properties/DelaySeconds", 0)), _asl()),
    ],
    "sweep-grace-covers-late-acquire": [
        ("grace minimum 15 s, below Init + acquire timeout", _broken(_set("Parameters/WorkloadMaxRunSeconds/MinValue", 15)), _asl()),
        ("acquire timeout 25 s: Init + 25 s beyond LATE_ACQUIRE_SECONDS", _broken(_set("Resources/AcquireLockFunction/Properties/Timeout", 25)), _asl()),
    ],
    "lock-limit-integers": [
        ("LockLimit a Number", _broken(_set("Parameters/LockLimit", {"Type": "Number", "Default": 1, "MinValue": 1, "MaxValue": 1000})), _asl()),
        ("a pattern that takes 1001", _broken(_set("Parameters/LockLimit/AllowedPattern", "^[1-9][0-9]{0,3}$")), _asl()),
        ("a pattern that takes 2.5", _broken(_set("Parameters/LockLimit/AllowedPattern", "^[0-9.]+$")), _asl()),
    ],
    "defaults-in-range": [
        ("CleanupDelaySeconds default 60 below its minimum 120",
         _broken(lambda t: t["Parameters"]["CleanupDelaySeconds"].update(Default=60, MinValue=120)), _asl()),
        ("TargetTimeoutSeconds default above its maximum",
         _broken(lambda t: t["Parameters"]["TargetTimeoutSeconds"].update(Default=31536000)), _asl()),
    ],
}


def self_test() -> int:
    failures = 0
    good = problems(GOOD_TEMPLATE, _asl())
    if good:
        failures += 1
        print(f"FAIL rejected the good template: {good}")
    else:
        print("ok   accepts the good template")
    for rule, cases in SELF_TEST_CASES.items():
        for label, template, definitions in cases:
            found = [message for found_rule, message in problems(template, definitions) if found_rule == rule]
            if found:
                print(f"ok   {rule} rejects {label}: {found[0]}")
            else:
                failures += 1
                print(f"FAIL {rule} did not reject {label}")
    missing = set(RULES) - set(SELF_TEST_CASES)
    for rule in sorted(missing):
        failures += 1
        print(f"FAIL {rule} has no self-test case")
    total = 1 + sum(len(cases) for cases in SELF_TEST_CASES.values())
    print(f"parameter orderings self-test: {total - failures} of {total} as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cfn_template import load

    path = Path(sys.argv[1])
    found = problems(load(path), lambda uri: (path.parent / uri).read_text())
    for rule, message in found:
        print(f"parameter orderings: {rule}: {message}")
    if not found:
        print(f"parameter orderings: {path}: {len(RULES)} rules hold")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
