"""The orderings between template.yaml's defaults and ranges that keep the lock safe.

CloudFormation Rules cannot compare numbers, so where the template cannot derive
one value from another, this check holds the orderings between its defaults and
ranges (issue 8, part 1; DESIGN.md, "Ends without a release"):

sample-timeout-derived    the sample workload function's Timeout is !Ref
                          WorkloadTimeoutSeconds: it never runs on after its Task
                          timed out.
workload-timeout-range    WorkloadTimeoutSeconds fits one Lambda invocation (1..900)
                          and its default is below ExecutionTimeoutSeconds' default.
max-run-covers-workload   WorkloadMaxRunSeconds' default is at least every timeout the
                          sample function can have, and its range reaches 900 (any
                          Lambda function's longest run).
lease-formula             every state machine's definition has TimeoutSeconds =
                          ${ExecutionTimeoutSeconds} and every leaseSeconds.$ is the
                          sum ExecutionTimeoutSeconds + WorkloadMaxRunSeconds +
                          LeaseMarginSeconds (nested States.MathAdd), each substituted
                          by the parameter of that name.
max-lease                 the largest possible lease is within the 31536000 s the
                          acquire function accepts.
lease-cap                 acquire-lock's MAX_LEASE_SECONDS is, unless the MaxLeaseSeconds
                          parameter is set, the sum of the lease's terms (the lease every
                          state machine of the stack asks for, by lease-formula): the
                          cap never refuses the stack's own executions; MaxLeaseSeconds
                          admits "" and exactly the integers 1..31536000.
cleanup-delay             CleanupDelaySeconds is the cleanup queue's DelaySeconds,
                          within SQS's 0..900, and its minimum exceeds the acquire
                          function's Timeout, so that an acquire in flight when the
                          execution ended has landed before the sweep looks.
defaults-in-range         every parameter above has its Default within its range.
lock-limit-integers       LockLimit admits exactly the integers 1..1000 that acquire-lock
                          accepts: a Number parameter would also take 2.5, deploy, and
                          then fail every execution with InvalidLockRequest.
queue-wait-timeout        a definition whose acquire Task has "TimeoutSeconds":
                          ${MaxWaitSeconds} (the queued workflow: the bound of its wait
                          in the queue) gets, at every MaxWaitSeconds the template
                          accepts (its MinValue, MinValue + 1, Default, MaxValue), a
                          positive TimeoutSeconds (ASL requires one; 0 would fail the
                          deploy), equal to MaxWaitSeconds wherever that is positive.

Usage: parameter_orderings.py template.yaml | parameter_orderings.py --self-test
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

ACQUIRE_MAX_LEASE_SECONDS = 31_536_000  # acquire-lock's leaseSeconds rule (README)
LAMBDA_MAX_TIMEOUT_SECONDS = 900
SQS_MAX_DELAY_SECONDS = 900
LEASE_TERMS = ["ExecutionTimeoutSeconds", "WorkloadMaxRunSeconds", "LeaseMarginSeconds"]
CHECKED_PARAMETERS = [*LEASE_TERMS, "WorkloadTimeoutSeconds", "CleanupDelaySeconds"]

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
def sample_timeout_derived(template: dict, definitions: Callable[[str], str]) -> list[str]:
    timeout = _properties(template, "SampleWorkloadFunction").get("Timeout")
    if timeout != {"Ref": "WorkloadTimeoutSeconds"}:
        return [f"SampleWorkloadFunction's Timeout is {timeout!r}, not !Ref WorkloadTimeoutSeconds"]
    return []


def workload_timeout_range(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    low, default, high = _range(template, "WorkloadTimeoutSeconds")
    if low is None or high is None or low < 1 or high > LAMBDA_MAX_TIMEOUT_SECONDS:
        found.append(f"WorkloadTimeoutSeconds ranges {low}..{high}, not within one Lambda invocation (1..900)")
    execution_default = _range(template, "ExecutionTimeoutSeconds")[1]
    if default is None or execution_default is None or default >= execution_default:
        found.append(f"WorkloadTimeoutSeconds' default {default} is not below ExecutionTimeoutSeconds' default {execution_default}")
    return found


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


def lease_formula(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    machines = _state_machines(template)
    if not machines:
        return ["no state machine to check"]
    for name, properties in machines.items():
        uri = properties.get("DefinitionUri")
        try:
            text = definitions(uri)
        except (OSError, TypeError) as error:
            found.append(f"{name}: cannot read its definition {uri!r}: {error}")
            continue
        if not re.search(r'"TimeoutSeconds":\s*\$\{ExecutionTimeoutSeconds\}\s*,\s*"StartAt"', text):
            found.append(f"{name}: {uri}'s own TimeoutSeconds is not ${{ExecutionTimeoutSeconds}}")
        expressions = re.findall(r'"leaseSeconds\.\$":\s*"([^"]*)"', text)
        if not expressions:
            found.append(f"{name}: {uri} passes no leaseSeconds.$")
        for expression in expressions:
            try:
                terms = lease_terms(expression)
            except ValueError as error:
                found.append(f"{name}: {uri}: {error}")
                continue
            if sorted(terms) != sorted(LEASE_TERMS):
                found.append(f"{name}: {uri}: lease {expression!r} is not {' + '.join(LEASE_TERMS)}")
        substitutions = properties.get("DefinitionSubstitutions", {}) or {}
        for term in LEASE_TERMS:
            if substitutions.get(term) != {"Ref": term}:
                found.append(f"{name}: DefinitionSubstitutions {term} is {substitutions.get(term)!r}, not !Ref {term}")
    return found


def max_lease(template: dict, definitions: Callable[[str], str]) -> list[str]:
    maxima = [_range(template, term)[2] for term in LEASE_TERMS]
    if any(value is None for value in maxima):
        return [f"a lease term has no MaxValue: {dict(zip(LEASE_TERMS, maxima))}"]
    if sum(maxima) > ACQUIRE_MAX_LEASE_SECONDS:
        return [f"the largest lease is {' + '.join(f'{v:.0f}' for v in maxima)} = {sum(maxima):.0f} s, above the acquire function's {ACQUIRE_MAX_LEASE_SECONDS}"]
    return []


def _sub_terms(expression: Any) -> list[str] | None:
    """The placeholders of a !Sub "${a}+${b}+${c}", None if it is anything else."""
    text = expression.get("Fn::Sub") if isinstance(expression, dict) and list(expression) == ["Fn::Sub"] else None
    if not isinstance(text, str) or not re.fullmatch(r"\$\{[A-Za-z0-9]+\}(\+\$\{[A-Za-z0-9]+\})*", text):
        return None
    return re.findall(r"\$\{([A-Za-z0-9]+)\}", text)


def lease_cap(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    parameter = template.get("Parameters", {}).get("MaxLeaseSeconds")
    if parameter is None or parameter.get("Type") != "String" or parameter.get("Default") != "":
        return [f"MaxLeaseSeconds is {parameter!r}, not a String parameter defaulting to \"\" (derive the cap)"]
    pattern = parameter.get("AllowedPattern", "")
    accepted = ["", "1", "90", "4800", "999999", str(ACQUIRE_MAX_LEASE_SECONDS)]
    refused = ["0", str(ACQUIRE_MAX_LEASE_SECONDS + 1), "99999999", "2.5", "01", "-1", " 5", "1e2", "60+30"]
    found += [f"MaxLeaseSeconds' AllowedPattern {pattern!r} refuses {value!r}" for value in accepted if not re.fullmatch(pattern, value)]
    found += [f"MaxLeaseSeconds' AllowedPattern {pattern!r} accepts {value!r}" for value in refused if re.fullmatch(pattern, value)]
    variables = (_properties(template, "AcquireLockFunction").get("Environment", {}) or {}).get("Variables", {}) or {}
    cap = variables.get("MAX_LEASE_SECONDS")
    if not (isinstance(cap, dict) and list(cap) == ["Fn::If"] and len(cap["Fn::If"]) == 3):
        return found + [f"acquire-lock's MAX_LEASE_SECONDS is {cap!r}, not !If [derive, the lease's terms, !Ref MaxLeaseSeconds]"]
    condition, derived, given = cap["Fn::If"]
    if (template.get("Conditions", {}) or {}).get(condition) not in (
            {"Fn::Equals": [{"Ref": "MaxLeaseSeconds"}, ""]}, {"Fn::Equals": ["", {"Ref": "MaxLeaseSeconds"}]}):
        found.append(f"MAX_LEASE_SECONDS derives the cap under {condition!r}, not when MaxLeaseSeconds is \"\"")
    terms = _sub_terms(derived)
    if terms is None or sorted(terms) != sorted(LEASE_TERMS):
        found.append(f"the derived cap {derived!r} is not !Sub of {' + '.join(LEASE_TERMS)}: "
                     "the stack's own executions would be refused, or the cap would not bound them")
    if given != {"Ref": "MaxLeaseSeconds"}:
        found.append(f"a set MaxLeaseSeconds gives MAX_LEASE_SECONDS {given!r}, not !Ref MaxLeaseSeconds")
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


# Lambda's Init phase (up to 10 s, outside the function timeout) plus the acquire
# function's Timeout: an acquire in flight when its execution ended has landed by
# then, and its grant time is at most that after the end (LATE_ACQUIRE_SECONDS in
# crates/sfn-lock/src/sweep_policy.rs is 30).
LAMBDA_INIT_SECONDS = 10
LATE_ACQUIRE_SECONDS = 30


def late_acquire_seconds() -> int:
    """LATE_ACQUIRE_SECONDS as crates/sfn-lock/src/sweep_policy.rs defines it."""
    source = (Path(__file__).resolve().parents[2] / "crates/sfn-lock/src/sweep_policy.rs").read_text()
    found = re.findall(r"const\s+LATE_ACQUIRE_SECONDS\s*:\s*u32\s*=\s*([0-9_]+)\s*;", source)
    if len(found) != 1:
        raise SystemExit("parameter_orderings: cannot read LATE_ACQUIRE_SECONDS from sweep_policy.rs")
    return int(found[0].replace("_", ""))


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


LOCK_LIMIT_MAX = 1000  # acquire-lock's `limit` rule (README)


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


_QUEUE_TIMEOUT = re.compile(r'"TimeoutSeconds":\s*\$\{MaxWaitSeconds\}')


def _evaluate(template: dict, expression: Any, parameter: str, value: float) -> float | None:
    """The number a substitution takes when `parameter` is `value` (a Ref of a Number
    parameter is its text, as CloudFormation gives it); None if it cannot tell."""
    if isinstance(expression, (int, float)) or (isinstance(expression, str) and _number(expression) is not None):
        return float(expression)
    if expression == {"Ref": parameter}:
        return value
    if isinstance(expression, dict) and list(expression) == ["Fn::If"]:
        condition, yes, no = expression["Fn::If"]
        holds = _condition(template, (template.get("Conditions", {}) or {}).get(condition), parameter, value)
        return None if holds is None else _evaluate(template, yes if holds else no, parameter, value)
    return None


def _condition(template: dict, condition: Any, parameter: str, value: float) -> bool | None:
    if isinstance(condition, dict) and list(condition) == ["Fn::Not"]:
        inner = _condition(template, condition["Fn::Not"][0], parameter, value)
        return None if inner is None else not inner
    if isinstance(condition, dict) and list(condition) == ["Fn::Equals"]:
        sides = [f"{value:g}" if side == {"Ref": parameter} else side for side in condition["Fn::Equals"]]
        if all(isinstance(side, (str, int, float)) for side in sides):
            return str(sides[0]) == str(sides[1])
    return None


def queue_wait_timeout(template: dict, definitions: Callable[[str], str]) -> list[str]:
    found = []
    low, default, high = _range(template, "MaxWaitSeconds")
    for name, properties in _state_machines(template).items():
        try:
            text = definitions(properties.get("DefinitionUri"))
        except (OSError, TypeError):
            continue  # lease-formula reports an unreadable definition
        if not _QUEUE_TIMEOUT.search(text):
            continue
        if None in (low, default, high):
            found.append(f"{name}: MaxWaitSeconds, its acquire Task's TimeoutSeconds, has no MinValue, Default or MaxValue")
            continue
        substitution = (properties.get("DefinitionSubstitutions", {}) or {}).get("MaxWaitSeconds")
        for value in sorted({low, min(low + 1, high), default, high}):
            timeout = _evaluate(template, substitution, "MaxWaitSeconds", value)
            if timeout is None:
                found.append(f"{name}: cannot tell what DefinitionSubstitutions MaxWaitSeconds {substitution!r} is "
                             f"when MaxWaitSeconds is {value:g}")
                break
            if timeout < 1:
                found.append(f"{name}: with MaxWaitSeconds {value:g} the acquire Task's TimeoutSeconds is {timeout:g}, "
                             "not positive: CreateStateMachine refuses the definition")
            elif value >= 1 and timeout != value:
                found.append(f"{name}: with MaxWaitSeconds {value:g} the acquire Task's TimeoutSeconds is {timeout:g}: "
                             "the wait in the queue is not MaxWaitSeconds")
    return found


RULES: dict[str, Callable[[dict, Callable[[str], str]], list[str]]] = {
    "sample-timeout-derived": sample_timeout_derived,
    "workload-timeout-range": workload_timeout_range,
    "max-run-covers-workload": max_run_covers_workload,
    "lease-formula": lease_formula,
    "max-lease": max_lease,
    "lease-cap": lease_cap,
    "cleanup-delay": cleanup_delay,
    "sweep-grace-covers-late-acquire": sweep_grace_covers_late_acquire,
    "defaults-in-range": defaults_in_range,
    "lock-limit-integers": lock_limit_integers,
    "queue-wait-timeout": queue_wait_timeout,
}


def problems(template: dict, definitions: Callable[[str], str]) -> list[Problem]:
    return [(rule, message) for rule, check in RULES.items() for message in check(template, definitions)]


# -- self-test --------------------------------------------------------------------------
GOOD_ASL = """{
  "TimeoutSeconds": ${ExecutionTimeoutSeconds},
  "StartAt": "Acquire Lock",
  "States": {"Acquire Lock": {"Type": "Task", "Parameters": {"Payload": {
    "leaseSeconds.$": "States.MathAdd(States.MathAdd(${ExecutionTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"
  }}, "End": true}}
}"""
QUEUED_ASL = GOOD_ASL.replace('"Type": "Task",', '"Type": "Task", "TimeoutSeconds": ${MaxWaitSeconds},')
_LEASE_SUBSTITUTIONS = {term: {"Ref": term} for term in LEASE_TERMS}
_MAX_LEASE_PATTERN = "^$|^([1-9][0-9]{0,6}|[12][0-9]{7}|30[0-9]{6}|31[0-4][0-9]{5}|315[0-2][0-9]{4}|3153[0-5][0-9]{3}|31536000)$"
_CAP = "Resources/AcquireLockFunction/Properties/Environment/Variables/MAX_LEASE_SECONDS"
GOOD_TEMPLATE: dict[str, Any] = {
    "Parameters": {
        "ExecutionTimeoutSeconds": {"Type": "Number", "Default": 3600, "MinValue": 60, "MaxValue": 31363200},
        "LeaseMarginSeconds": {"Type": "Number", "Default": 300, "MinValue": 0, "MaxValue": 86400},
        "WorkloadTimeoutSeconds": {"Type": "Number", "Default": 300, "MinValue": 1, "MaxValue": 900},
        "WorkloadMaxRunSeconds": {"Type": "Number", "Default": 900, "MinValue": 30, "MaxValue": 86400},
        "CleanupDelaySeconds": {"Type": "Number", "Default": 900, "MinValue": 15, "MaxValue": 900},
        "LockLimit": {"Type": "String", "Default": "1", "AllowedPattern": "^([1-9][0-9]{0,2}|1000)$"},
        "MaxWaitSeconds": {"Type": "Number", "Default": 3600, "MinValue": 0, "MaxValue": 36000},
        "MaxLeaseSeconds": {"Type": "String", "Default": "", "AllowedPattern": _MAX_LEASE_PATTERN},
    },
    "Conditions": {"MaxWaitIsZero": {"Fn::Equals": [{"Ref": "MaxWaitSeconds"}, "0"]},
                   "DeriveMaxLease": {"Fn::Equals": [{"Ref": "MaxLeaseSeconds"}, ""]}},
    "Resources": {
        "AcquireLockFunction": {"Type": "AWS::Serverless::Function", "Properties": {"Timeout": 10, "Environment": {"Variables": {
            "MAX_LEASE_SECONDS": {"Fn::If": ["DeriveMaxLease", {"Fn::Sub": "${ExecutionTimeoutSeconds}+${WorkloadMaxRunSeconds}+${LeaseMarginSeconds}"},
                                             {"Ref": "MaxLeaseSeconds"}]}}}}},
        "SampleWorkloadFunction": {"Type": "AWS::Serverless::Function", "Properties": {"Timeout": {"Ref": "WorkloadTimeoutSeconds"}}},
        "CleanupQueue": {"Type": "AWS::SQS::Queue", "Properties": {"DelaySeconds": {"Ref": "CleanupDelaySeconds"}}},
        "Locked": {"Type": "AWS::Serverless::StateMachine", "Properties": {"DefinitionUri": "locked.asl.json", "DefinitionSubstitutions": dict(_LEASE_SUBSTITUTIONS)}},
        "Attached": {"Type": "AWS::Serverless::StateMachine", "Properties": {"DefinitionUri": "attached.asl.json", "DefinitionSubstitutions": dict(_LEASE_SUBSTITUTIONS)}},
        "Queued": {"Type": "AWS::Serverless::StateMachine", "Properties": {"DefinitionUri": "queued.asl.json", "DefinitionSubstitutions": {
            **_LEASE_SUBSTITUTIONS, "MaxWaitSeconds": {"Fn::If": ["MaxWaitIsZero", 1, {"Ref": "MaxWaitSeconds"}]}}}},
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


def _asl(attached: str) -> Callable[[str], str]:
    return lambda uri: attached if uri == "attached.asl.json" else QUEUED_ASL if uri == "queued.asl.json" else GOOD_ASL


# rule -> [(label, template, definitions)], each of which that rule must reject.
SELF_TEST_CASES: dict[str, list[tuple[str, dict, Callable[[str], str]]]] = {
    "sample-timeout-derived": [
        ("sample Timeout a fixed 900 (longer than its Task)", _broken(_set("Resources/SampleWorkloadFunction/Properties/Timeout", 900)), _asl(GOOD_ASL)),
    ],
    "workload-timeout-range": [
        ("WorkloadTimeoutSeconds up to 3600", _broken(_set("Parameters/WorkloadTimeoutSeconds/MaxValue", 3600)), _asl(GOOD_ASL)),
        ("workload default above the execution default", _broken(_set("Parameters/ExecutionTimeoutSeconds/Default", 120)), _asl(GOOD_ASL)),
    ],
    "max-run-covers-workload": [
        ("WorkloadMaxRunSeconds default 300 below a 900 s sample", _broken(_set("Parameters/WorkloadMaxRunSeconds/Default", 300)), _asl(GOOD_ASL)),
        ("WorkloadMaxRunSeconds capped at 600", _broken(_set("Parameters/WorkloadMaxRunSeconds/MaxValue", 600)), _asl(GOOD_ASL)),
    ],
    "lease-formula": [
        ("attach lease without WorkloadMaxRunSeconds", GOOD_TEMPLATE, _asl(GOOD_ASL.replace(
            "States.MathAdd(States.MathAdd(${ExecutionTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})",
            "States.MathAdd(${ExecutionTimeoutSeconds}, ${LeaseMarginSeconds})"))),
        ("lease term counted twice", GOOD_TEMPLATE, _asl(GOOD_ASL.replace("${LeaseMarginSeconds})", "${ExecutionTimeoutSeconds})"))),
        ("execution timeout not the lease's", GOOD_TEMPLATE, _asl(GOOD_ASL.replace('"TimeoutSeconds": ${ExecutionTimeoutSeconds}', '"TimeoutSeconds": 99999'))),
        ("substitution from another parameter", _broken(_set("Resources/Locked/Properties/DefinitionSubstitutions/WorkloadMaxRunSeconds", {"Ref": "WorkloadTimeoutSeconds"})), _asl(GOOD_ASL)),
    ],
    "max-lease": [
        ("ExecutionTimeoutSeconds up to 365 days", _broken(_set("Parameters/ExecutionTimeoutSeconds/MaxValue", 31536000)), _asl(GOOD_ASL)),
    ],
    "lease-cap": [
        ("no MaxLeaseSeconds parameter", _broken(lambda t: t["Parameters"].pop("MaxLeaseSeconds")), _asl(GOOD_ASL)),
        ("a pattern that takes 0", _broken(_set("Parameters/MaxLeaseSeconds/AllowedPattern", "^$|^[0-9]{1,8}$")), _asl(GOOD_ASL)),
        ("a pattern that refuses one year", _broken(_set("Parameters/MaxLeaseSeconds/AllowedPattern", "^$|^[1-9][0-9]{0,6}$")), _asl(GOOD_ASL)),
        ("no cap at all", _broken(lambda t: t["Resources"]["AcquireLockFunction"]["Properties"].pop("Environment")), _asl(GOOD_ASL)),
        ("the derived cap without WorkloadMaxRunSeconds", _broken(_set(_CAP, {"Fn::If": [
            "DeriveMaxLease", {"Fn::Sub": "${ExecutionTimeoutSeconds}+${LeaseMarginSeconds}"}, {"Ref": "MaxLeaseSeconds"}]})), _asl(GOOD_ASL)),
        ("a fixed cap of 3600", _broken(_set(_CAP, "3600")), _asl(GOOD_ASL)),
        ("the !If's branches swapped", _broken(_set(_CAP, {"Fn::If": [
            "DeriveMaxLease", {"Ref": "MaxLeaseSeconds"}, {"Fn::Sub": "${ExecutionTimeoutSeconds}+${WorkloadMaxRunSeconds}+${LeaseMarginSeconds}"}]})),
         _asl(GOOD_ASL)),
        ("deriving when MaxLeaseSeconds is 0", _broken(_set("Conditions/DeriveMaxLease", {"Fn::Equals": [{"Ref": "MaxLeaseSeconds"}, "0"]})), _asl(GOOD_ASL)),
    ],
    "cleanup-delay": [
        ("delay minimum 10 s, not above the acquire timeout", _broken(_set("Parameters/CleanupDelaySeconds/MinValue", 10)), _asl(GOOD_ASL)),
        ("delay up to 3600 s, beyond SQS", _broken(_set("Parameters/CleanupDelaySeconds/MaxValue", 3600)), _asl(GOOD_ASL)),
        ("queue not delayed by CleanupDelaySeconds", _broken(_set("Resources/CleanupQueue/Properties/DelaySeconds", 0)), _asl(GOOD_ASL)),
    ],
    "sweep-grace-covers-late-acquire": [
        ("grace minimum 15 s, below Init + acquire timeout", _broken(_set("Parameters/WorkloadMaxRunSeconds/MinValue", 15)), _asl(GOOD_ASL)),
        ("acquire timeout 25 s: Init + 25 s beyond LATE_ACQUIRE_SECONDS", _broken(_set("Resources/AcquireLockFunction/Properties/Timeout", 25)), _asl(GOOD_ASL)),
    ],
    "lock-limit-integers": [
        ("LockLimit a Number", _broken(_set("Parameters/LockLimit", {"Type": "Number", "Default": 1, "MinValue": 1, "MaxValue": 1000})), _asl(GOOD_ASL)),
        ("a pattern that takes 1001", _broken(_set("Parameters/LockLimit/AllowedPattern", "^[1-9][0-9]{0,3}$")), _asl(GOOD_ASL)),
        ("a pattern that takes 2.5", _broken(_set("Parameters/LockLimit/AllowedPattern", "^[0-9.]+$")), _asl(GOOD_ASL)),
    ],
    "queue-wait-timeout": [
        ("TimeoutSeconds !Ref MaxWaitSeconds, whose MinValue is 0",
         _broken(_set("Resources/Queued/Properties/DefinitionSubstitutions/MaxWaitSeconds", {"Ref": "MaxWaitSeconds"})), _asl(GOOD_ASL)),
        ("the !If's branches swapped", _broken(_set("Resources/Queued/Properties/DefinitionSubstitutions/MaxWaitSeconds",
                                                    {"Fn::If": ["MaxWaitIsZero", {"Ref": "MaxWaitSeconds"}, 1]})), _asl(GOOD_ASL)),
        ("the condition comparing with 1", _broken(_set("Conditions/MaxWaitIsZero", {"Fn::Equals": [{"Ref": "MaxWaitSeconds"}, "1"]})), _asl(GOOD_ASL)),
        ("a fixed TimeoutSeconds of 60", _broken(_set("Resources/Queued/Properties/DefinitionSubstitutions/MaxWaitSeconds", 60)), _asl(GOOD_ASL)),
    ],
    "defaults-in-range": [
        ("CleanupDelaySeconds default 60 below its minimum 120",
         _broken(lambda t: t["Parameters"]["CleanupDelaySeconds"].update(Default=60, MinValue=120)), _asl(GOOD_ASL)),
    ],
}


def self_test() -> int:
    failures = 0
    good = problems(GOOD_TEMPLATE, _asl(GOOD_ASL))
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
