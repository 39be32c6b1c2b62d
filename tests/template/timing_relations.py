#!/usr/bin/env python3
"""The timing relations of the stack's state machines, proven from template.yaml's
parameters and the definitions themselves, deploying nothing (issue 21).

Why Python, not a tool: it evaluates arithmetic over the parameters' ranges and walks
the definitions' state graphs (catchers, Choices, Fail states); no tool models either.

The definitions have no execution timeout: each state is bounded instead (the
wait by MaxWaitSeconds, the workload by its Task's TimeoutSeconds, the held path
by its Wait), and the lease is the sum of those bounds. This check reads each
AWS::Serverless::StateMachine's definition (its DefinitionUri) and its
DefinitionSubstitutions, and evaluates the numbers for every combination of the
values the template accepts for the parameters they use (MinValue, MinValue + 1,
Default, MaxValue - 1, MaxValue of each, and each branch of a !If on them):

no-execution-timeout   no definition has a top-level TimeoutSeconds (or ...Path), and
                       no state but the workload Task and the queued acquire has a
                       TimeoutSeconds or HeartbeatSeconds: nothing can end an
                       execution before its wait's bound plus its workload's. So a wait
                       that runs out ends in LockWaitTimeout, and an execution
                       admitted at the last moment of its wait still gets its
                       workload's whole time (the attach child its whole
                       TargetTimeoutSeconds, counted from its start). With a top-level
                       TimeoutSeconds, the accepted values that let it fire first are
                       shown.
wait-bound             an acquire that waits by polling (it retries LockUnavailable)
                       sends maxWaitSeconds = ${MaxWaitSeconds} (MaxWaitSeconds itself
                       at every accepted value) and waitStartedAt.$ =
                       $$.Execution.StartTime, so that acquire-lock ends the wait with
                       LockWaitTimeout; no acquire retries LockWaitTimeout (or
                       States.ALL, or, queued, States.Timeout), which would start the
                       wait afresh.
queue-wait-timeout     an acquire that waits in the queue (a .waitForTaskToken
                       callback, which makes no further call) has "TimeoutSeconds":
                       ${MaxWaitSeconds}, positive at every accepted value (ASL
                       requires it) and MaxWaitSeconds itself wherever that is.
workload-bound         the workload (the state after the acquire: a Parallel whose
                       branch holds one Task, or a Task) is bounded by that Task's
                       TimeoutSeconds, a placeholder, positive at every accepted value;
                       the Task retries only errors that prove nothing started
                       (Lambda.TooManyRequestsException, a refused start of the child),
                       and the Parallel nothing: a retry after a timeout would run the
                       workload again beside the first attempt, beyond the bound.
held-path              exactly one Wait state, the held path, whose Seconds is a
                       placeholder, and every error out of the workload reaches it
                       before any release, or ends the execution without releasing (the
                       sweep frees the lock). Walked state by state, through Choices,
                       catchers and Fail states:
                       - every Catch of the workload state (it must catch States.ALL)
                         leads to the held Wait before a release (but the attach Task's
                         catcher of a refused start, StepFunctions.ExecutionLimitExceeded
                         [Exception]: no child exists);
                       - the attach variant's child runs on after its Task's error until
                         Stop Target Execution stopped it, the stop found no execution
                         (Sfn.ExecutionDoesNotExistException: no standard child; an
                         Express one cannot be stopped), or Describe Target Execution
                         read a Status other than RUNNING or PENDING_REDRIVE (each Status
                         is tried on the Choice after it): reaching the held Wait while it
                         may run is a release too early;
                       - in a Parallel, every catcher of the workload Task is followed
                         through the branch: a Fail state leaves the branch, with the
                         error it names or, through ErrorPath, the one caught, and the
                         Parallel's Catch must take each (to the held path, above); a
                         normal end of the branch goes on to the state after the
                         Parallel, which may release at once only for a Pass that ends the
                         branch with one marker field, routed by a Choice rule on that
                         marker (not its Default, the success path), and only for a
                         catcher behind catchers that hold and together list exactly the
                         errors after which the invocation may still run (States.Timeout,
                         States.HeartbeatTimeout, the Lambda service errors).
lease-is-bound-sum     every acquire passes leaseSeconds.$ (never a fixed leaseSeconds
                       or none: DefaultLeaseSeconds), and it is exactly the workload
                       Task's TimeoutSeconds placeholder + the held Wait's Seconds
                       placeholder + ${LeaseMarginSeconds}, as read from that same
                       definition.
lease-within-contract  every lease, at every accepted value, is within 1..31536000
                       (limits.max_lease_seconds of contract/code-facts.json).
margin-covers-retries  LeaseMarginSeconds' smallest accepted value covers the retry
                       pauses between the grant and the held path (the retriers of the
                       workload state, of every state in its branch, and of the states
                       between its catchers and the held Wait, such as the attach
                       variant's stop of the child and read of its status, each at its
                       longest, jitter aside) plus Lambda's Init (a workload invocation
                       may start that late): so the lease outlasts the longest the lock
                       can be needed, and by at most LeaseMarginSeconds.
stop-target            a stopExecution or describeExecution Task (the attach
                       variant's Stop Target Execution, Describe Target Execution)
                       names the child the sync Task started: its
                       ExecutionArn.$ is States.Format('${Prefix}{}-{}', ...) with the
                       Name.$ arguments of the startExecution Task, and ${Prefix} is
                       the target's execution ARN up to the name, built from the same
                       TargetStateMachineArn as the start, and exactly the prefix of the
                       role's states:StopExecution and states:DescribeExecution
                       Resource (each aws-sdk integration needs its action on the
                       child's ARN, nothing more).

What parameter_orderings.py proves is not repeated here: the sample function's
Timeout is WorkloadTimeoutSeconds, its Task's bound, and WorkloadMaxRunSeconds'
minimum covers its start-up after a timeout (sample-timeout-derived); MaxLeaseSeconds
(lease-cap).

Usage: timing_relations.py template.yaml | timing_relations.py --self-test
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from cfn_template import TemplateError, condition_values, intrinsic, load  # noqa: E402
from parameter_orderings import ACQUIRE_MAX_LEASE_SECONDS, LAMBDA_INIT_SECONDS, all_states, lease_terms, parse_definition  # noqa: E402
from retry_bounds import total_pauses  # noqa: E402

MARGIN = "LeaseMarginSeconds"
WAIT = "MaxWaitSeconds"
BOUND_KEYS = ("TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds", "HeartbeatSecondsPath")
# Errors after which a Task's invocation may still run (the Step Functions guide,
# "Handle Lambda service exceptions"; a timeout ends the state, not the work).
MAY_RUN_ERRORS = ("States.Timeout", "States.HeartbeatTimeout", "Lambda.ClientExecutionTimeoutException",
                  "Lambda.SdkClientException", "Lambda.ServiceException", "Lambda.AWSLambdaException")
# Errors that prove the workload never started: the start of the child was refused (the
# attach variant: released at once); Lambda throttled the invoke (retried).
NO_START_ERRORS = {"StepFunctions.ExecutionLimitExceeded", "StepFunctions.ExecutionLimitExceededException"}
RETRIABLE_ERRORS = NO_START_ERRORS | {"Lambda.TooManyRequestsException"}
# The stop found no execution by that ARN: usually none was started, but an Express
# target's child has an express: ARN that it cannot name, and nothing can stop it. The
# held path all the same, as after a stop.
NOT_STOPPABLE_ERRORS = {"Sfn.ExecutionDoesNotExistException"}
# DescribeExecution's Status of a child whose work goes on; and all its values.
# A status Step Functions may add later counts as running, as the sweep counts it.
RUNNING_STATUSES = ("RUNNING", "PENDING_REDRIVE", "A_STATUS_ADDED_LATER")
STATUSES = RUNNING_STATUSES + ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
STOP_RESOURCE = "arn:${Partition}:states:::aws-sdk:sfn:stopExecution"
DESCRIBE_RESOURCE = "arn:${Partition}:states:::aws-sdk:sfn:describeExecution"
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def placeholder(value: Any) -> str | None:
    match = _PLACEHOLDER.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


@dataclass
class Machine:
    name: str
    uri: str
    definition: dict
    substitutions: dict
    properties: dict

    @property
    def states(self) -> dict:
        return self.definition.get("States", {}) or {}

    def acquire(self) -> tuple[str, dict]:
        name = self.definition.get("StartAt")
        return name, self.states.get(name, {}) or {}

    def workload(self) -> tuple[str | None, dict, str | None, dict]:
        """(workload state, it, the Task that bounds it, that Task): the state after the
        acquire, and the one Task of its branch if it is a Parallel."""
        name = self.acquire()[1].get("Next")
        state = self.states.get(name, {}) or {}
        if state.get("Type") == "Task":
            return name, state, name, state
        if state.get("Type") == "Parallel":
            tasks = {n: s for branch in state.get("Branches", []) or []
                     for n, s in all_states(branch.get("States", {})).items() if s.get("Type") == "Task"}
            if len(tasks) == 1:
                (task_name, task), = tasks.items()
                return name, state, task_name, task
        return name, state, None, {}

    def held_waits(self) -> dict[str, dict]:
        return {n: s for n, s in all_states(self.states).items() if s.get("Type") == "Wait"}


def machines(template: dict, read: Callable[[str], str]) -> tuple[list[Machine], list[str]]:
    found, problems = [], []
    for name, resource in (template.get("Resources", {}) or {}).items():
        if resource.get("Type") not in ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine"):
            continue
        properties = resource.get("Properties", {}) or {}
        uri = properties.get("DefinitionUri")
        try:
            definition = parse_definition(read(uri))
        except (OSError, TypeError, ValueError) as error:
            problems.append(f"{name}: cannot read its definition {uri!r}: {error}")
            continue
        found.append(Machine(name, str(uri), definition, properties.get("DefinitionSubstitutions", {}) or {}, properties))
    if not found and not problems:
        problems.append("no state machine to check")
    return found, problems


# -- the values the template accepts ------------------------------------------------------
def _parameters_in(template: dict, expression: Any, seen: set[str] | None = None) -> set[str]:
    """The parameters an expression depends on: its Refs, and those of its !If conditions."""
    seen = set() if seen is None else seen
    found: set[str] = set()
    parameters = template.get("Parameters", {}) or {}
    conditions = template.get("Conditions", {}) or {}
    if isinstance(expression, dict):
        fn = intrinsic(expression)
        if fn and fn[0] == "Ref" and fn[1] in parameters:
            found.add(fn[1])
        if fn and fn[0] in ("Fn::If", "Condition"):
            condition = fn[1][0] if fn[0] == "Fn::If" else fn[1]
            if condition not in seen:
                seen.add(condition)
                found |= _parameters_in(template, conditions.get(condition), seen)
        for item in expression.values():
            found |= _parameters_in(template, item, seen)
    elif isinstance(expression, list):
        for item in expression:
            found |= _parameters_in(template, item, seen)
    return found


def accepted_values(template: dict, name: str) -> list[int] | str:
    """The values of a Number parameter to try, or why it has none to try."""
    spec = (template.get("Parameters", {}) or {}).get(name, {}) or {}
    if spec.get("Type") != "Number":
        return f"{name} is a {spec.get('Type')}, not a Number with a range"
    try:
        low, default, high = (int(float(spec[key])) for key in ("MinValue", "Default", "MaxValue"))
    except (KeyError, TypeError, ValueError):
        return f"{name} has no MinValue, Default and MaxValue: it accepts any number"
    return sorted({value for value in (low, low + 1, default, high - 1, high) if low <= value <= high})


def sweep(template: dict, machine: Machine, names: list[str]) -> Iterator[dict[str, int] | str]:
    """Every combination of accepted values of the parameters these placeholders use
    (a message instead, once, for a parameter without a range)."""
    parameters = sorted(set().union(*(_parameters_in(template, machine.substitutions.get(n)) for n in names)))
    choices = []
    for parameter in parameters:
        values = accepted_values(template, parameter)
        if isinstance(values, str):
            yield f"{machine.name}: {values}"
            return
        choices.append(values)
    for combination in itertools.product(*choices):
        yield dict(zip(parameters, combination))


def evaluate(template: dict, expression: Any, values: dict[str, int]) -> float | None:
    """The number a substitution takes with these parameter values (None: not a number)."""
    if isinstance(expression, bool):
        return None
    if isinstance(expression, (int, float)):
        return float(expression)
    if isinstance(expression, str):
        try:
            return float(expression)
        except ValueError:
            return None
    fn = intrinsic(expression)
    if fn and fn[0] == "Ref":
        if fn[1] in values:
            return float(values[fn[1]])
        default = ((template.get("Parameters", {}) or {}).get(fn[1], {}) or {}).get("Default")
        return evaluate(template, default, values) if default is not None else None
    if fn and fn[0] == "Fn::If":
        decided = condition_values(template, {name: str(value) for name, value in values.items()})
        if fn[1][0] not in decided:
            return None
        return evaluate(template, fn[1][1] if decided[fn[1][0]] else fn[1][2], values)
    return None


def _show(values: dict[str, int]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items()) or "the defaults"


# -- paths through a definition ------------------------------------------------------------
# A walk follows every way out of a state: Next, a Choice's rules and Default, each
# catcher. It knows what it can of the data only where a Choice reads it: the
# branch's marker right after the Parallel, the child's status right after
# Describe Target Execution. Whether the child of the attach variant may still run
# as a state machine ("runs") or has ended or been stopped ("stopped") rides along.
class _Unknown:
    pass


_UNKNOWN, _ABSENT, _OBJECT = _Unknown(), _Unknown(), _Unknown()  # not known; no such field; an object


@dataclass(frozen=True)
class Facts:
    """What is known of a state's input: the values at some paths; with closed, that it
    has no other top-level field."""
    values: tuple[tuple[str, Any], ...] = ()
    closed: bool = False

    def lookup(self, path: Any) -> Any:
        for known, value in self.values:
            if known == path:
                return value
        if self.closed and isinstance(path, str) and path.startswith("$."):
            top = re.split(r"[.\[]", path[2:])[0]
            if top not in {re.split(r"[.\[]", known[2:])[0] for known, _ in self.values}:
                return _ABSENT
        return _UNKNOWN


NOTHING_KNOWN = Facts()


def _evaluate(rule: dict, facts: Facts) -> bool | None:
    """A Choice rule on what is known (None: it may hold or not)."""
    if "And" in rule or "Or" in rule:
        found = [_evaluate(r, facts) for r in rule.get("And", rule.get("Or")) or []]
        decisive = False if "And" in rule else True
        return decisive if decisive in found else None if None in found else not decisive
    if "Not" in rule:
        found = _evaluate(rule["Not"], facts)
        return None if found is None else not found
    value = facts.lookup(rule.get("Variable"))
    if value is _UNKNOWN:
        return None
    if "IsPresent" in rule:
        return (value is not _ABSENT) == bool(rule["IsPresent"])
    if isinstance(value, str) and "StringEquals" in rule:
        return value == rule["StringEquals"]
    if isinstance(value, str) and "IsString" in rule:
        return bool(rule["IsString"])
    return None  # a comparison this check does not model, or on a missing field (States.Runtime)


def choice_moves(state: dict, facts: Facts) -> list[tuple[str, str]]:
    """Where a Choice may go on what is known: (state, "rule" | "default" when it is the only
    way, "maybe" otherwise). No way at all: States.NoChoiceMatched."""
    moves: list[str] = []
    how = "maybe"
    for rule in state.get("Choices", []) or []:
        holds = _evaluate(rule, facts)
        if holds is False:
            continue
        moves.append(rule.get("Next"))
        if holds is True:
            how = "rule" if len(moves) == 1 else "maybe"
            break
    else:
        if state.get("Default"):
            moves.append(state["Default"])
        how = "default" if len(moves) == 1 and state.get("Default") else "maybe"
    return [(name, how if len(moves) == 1 else "maybe") for name in moves if name]


def _is_release(state: dict) -> bool:
    return state.get("Type") == "Task" and (state.get("Parameters", {}) or {}).get("FunctionName") == "${ReleaseLockFunctionArn}"


def _status_path(state: dict) -> str | None:
    """Where a describeExecution Task puts the child's Status (None: nowhere a Choice reads)."""
    result_path = state.get("ResultPath", "$")
    if result_path is None or state.get("OutputPath", "$") != "$" or not isinstance(result_path, str):
        return None
    selector = state.get("ResultSelector")
    leaf = "Status" if selector is None else next(
        (key.removesuffix(".$") for key, value in selector.items() if key.endswith(".$") and value == "$.Status"), None)
    if leaf is None:
        return None
    return f"$.{leaf}" if result_path == "$" else f"{result_path}.{leaf}"


def _moves(state: dict, child: str, facts: Facts) -> list[tuple[str, str, Facts]]:
    """The states a walk goes on to: (name, the child then, what is known of the data then)."""
    described = child.startswith("described ")
    after = "runs" if described else child  # the status read is no longer where a Choice reads it
    if state.get("Type") == "Choice":
        if described:
            path = child.removeprefix("described ")
            return [(name, "runs" if status in RUNNING_STATUSES else "stopped", NOTHING_KNOWN)
                    for status in STATUSES for name, _ in choice_moves(state, Facts(((path, status),)))]
        return [(name, child, NOTHING_KNOWN) for name, _ in choice_moves(state, facts)]
    resource = state.get("Resource")
    success = after
    if resource == STOP_RESOURCE:
        success = "stopped"
    elif resource == DESCRIBE_RESOURCE and after == "runs":
        path = _status_path(state)
        success = f"described {path}" if path else "runs"
    found = [(state["Next"], success, NOTHING_KNOWN)] if state.get("Next") else []
    for catcher in state.get("Catch", []) or []:
        stopped = resource == STOP_RESOURCE and set(catcher.get("ErrorEquals", [])) <= NOT_STOPPABLE_ERRORS
        found.append((catcher.get("Next"), "stopped" if stopped else after, NOTHING_KNOWN))
    return [move for move in found if move[0]]


def release_without_hold(states: dict, start: str, hold: str, child: str = "stopped",
                         facts: Facts = NOTHING_KNOWN) -> tuple[list[str], str] | None:
    """A path from `start` (the path and what is wrong with it) that reaches a release
    before the held Wait `hold`, or reaches `hold` while the child may still run (the
    release after it would come too early). None: every path holds first, or ends (a Fail,
    a Succeed) without releasing."""
    seen: set[tuple[str, str, Facts]] = set()

    def walk(name: str, child: str, facts: Facts, path: list[str]) -> tuple[list[str], str] | None:
        if (name, child, facts) in seen or name not in states:
            return None
        seen.add((name, child, facts))
        path = path + [name]
        if name == hold:
            return None if child == "stopped" else (path, "waits there while the child may still run, then releases")
        if _is_release(states[name]):
            return path, "releases without holding the lock"
        for following, next_child, next_facts in _moves(states[name], child, facts):
            found = walk(following, next_child, next_facts, path)
            if found:
                return found
        return None

    return walk(start, child, facts, [])


def states_before(states: dict, start: str, hold: str) -> set[str]:
    """The states on paths from `start` up to (not including) `hold`, or a release."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        name = stack.pop()
        if name == hold or name in seen or name not in states or _is_release(states[name]):
            continue
        seen.add(name)
        stack += [following for following, _, _ in _moves(states[name], "runs", NOTHING_KNOWN)]
    return seen


def branch_outcomes(states: dict, start: str) -> tuple[list[tuple[list[str], set[str] | None]], list[list[str]]]:
    """How a walk from `start` inside a Parallel's branch leaves it: ([(path to a Fail
    state, the error names it raises, None if taken from the data)], [path to a normal
    end of the branch])."""
    leaves: list[tuple[list[str], set[str] | None]] = []
    ends: list[list[str]] = []
    seen: set[str] = set()

    def walk(name: str, path: list[str]) -> None:
        if name in seen or name not in states:
            return
        seen.add(name)
        path = path + [name]
        state = states[name]
        if state.get("Type") == "Fail":
            leaves.append((path, {state["Error"]} if isinstance(state.get("Error"), str) else None))
            return
        if state.get("Type") == "Succeed" or state.get("End") is True:
            ends.append(path)
        if state.get("Type") == "Choice":
            moves = [following for following, _ in choice_moves(state, NOTHING_KNOWN)]
            if not state.get("Default"):
                leaves.append((path, {"States.NoChoiceMatched"}))
        else:
            moves = [following for following, _, _ in _moves(state, "stopped", NOTHING_KNOWN)]
        for following in moves:
            walk(following, path)

    walk(start, [])
    return leaves, ends


def first_catcher(catchers: list[dict], error: str) -> dict | None:
    """The catcher that takes an error (States.ALL takes all but these two)."""
    for catcher in catchers:
        names = catcher.get("ErrorEquals", []) or []
        if error in names or ("States.ALL" in names and error not in ("States.Runtime", "States.DataLimitExceeded")):
            return catcher
    return None


def _marker_facts(parallel: dict, end: dict) -> tuple[str | None, Facts]:
    """The branch's output as the state after the Parallel reads it, if the branch ends in a
    Pass whose Parameters build one marker field: (its path, that it is the only field)."""
    parameters = end.get("Parameters")
    plain = all(end.get(key, "$") == "$" for key in ("ResultPath", "OutputPath", "InputPath"))
    passes_on = parallel.get("OutputPath") == "$[0]" and all(
        parallel.get(key, "$") == "$" for key in ("ResultPath", "InputPath")) and "ResultSelector" not in parallel
    if end.get("Type") != "Pass" or not isinstance(parameters, dict) or len(parameters) != 1 or not plain or not passes_on:
        return None, NOTHING_KNOWN
    marker = "$." + next(iter(parameters)).removesuffix(".$")
    return marker, Facts(((marker, _OBJECT),), closed=True)


# -- the rules ----------------------------------------------------------------------------
def no_execution_timeout(template: dict, machine: Machine) -> list[str]:
    found = []
    definition = machine.definition
    for key in ("TimeoutSeconds", "TimeoutSecondsPath"):
        if key in definition:
            found.append(f"{machine.name}: {machine.uri} has a top-level {key} {definition[key]!r}: it can end an "
                         "execution while it waits or while its workload runs, before LockWaitTimeout or the "
                         "workload's own bound")
    timeout = placeholder(definition.get("TimeoutSeconds"))
    _, acquire = machine.acquire()
    wait = placeholder(acquire.get("TimeoutSeconds")) or placeholder((acquire.get("Parameters", {}) or {}).get("Payload", {}).get("maxWaitSeconds"))
    bound = placeholder(machine.workload()[3].get("TimeoutSeconds"))
    if timeout and bound:
        worst = None
        names = [n for n in (timeout, wait, bound) if n]
        for values in sweep(template, machine, names):
            if isinstance(values, str):
                break
            numbers = [evaluate(template, machine.substitutions.get(n), values) for n in (timeout, wait, bound) if n]
            if None in numbers:
                continue
            short = numbers[0] - sum(numbers[1:])
            if worst is None or short < worst[0]:
                worst = (short, values, numbers)
        if worst and worst[0] < 0:
            short, values, numbers = worst
            found.append(f"{machine.name}: with {_show(values)} the execution times out after {numbers[0]:.0f} s, "
                         f"before a wait of {sum(numbers[1:-1]):.0f} s and the workload's {numbers[-1]:.0f} s "
                         f"({-short:.0f} s short)")
    task_name = machine.workload()[2]
    acquire_name = machine.acquire()[0]
    for name, state in all_states(machine.states).items():
        for key in BOUND_KEYS:
            if key not in state:
                continue
            if key == "TimeoutSeconds" and name == task_name:
                continue  # the workload's bound (workload-bound)
            if key == "TimeoutSeconds" and name == acquire_name and state[key] == f"${{{WAIT}}}":
                continue  # the wait in the queue (queue-wait-timeout)
            if (key == "TimeoutSeconds" and isinstance(state[key], int)
                    and ":states:::aws-sdk:" in str(state.get("Resource", ""))):
                continue  # one SDK call's attempt, after the workload (margin-covers-retries counts it)
            found.append(f"{machine.name}: {name} has {key} {state[key]!r}, a bound the timing relations do not "
                         "account for: it may end the wait or the workload early")
    return found


def wait_bound(template: dict, machine: Machine) -> list[str]:
    found = []
    name, acquire = machine.acquire()
    payload = (acquire.get("Parameters", {}) or {}).get("Payload", {}) or {}
    retriers = acquire.get("Retry", []) or []
    queued = str(acquire.get("Resource", "")).endswith(".waitForTaskToken")
    restarting = {"LockWaitTimeout", "States.ALL"} | ({"States.Timeout"} if queued else set())
    for retrier in retriers:
        if restarting & set(retrier.get("ErrorEquals", [])):
            found.append(f"{machine.name}: {name} retries {sorted(restarting & set(retrier['ErrorEquals']))}: "
                         "a wait that ran out would start again instead of ending in LockWaitTimeout")
    polls = any("LockUnavailable" in retrier.get("ErrorEquals", []) for retrier in retriers)
    if polls:
        if payload.get("maxWaitSeconds") != f"${{{WAIT}}}":
            found.append(f"{machine.name}: {name} waits (it retries LockUnavailable) but sends maxWaitSeconds "
                         f"{payload.get('maxWaitSeconds')!r}, not ${{{WAIT}}}: nothing ends the wait with LockWaitTimeout")
        if payload.get("waitStartedAt.$") != "$$.Execution.StartTime":
            found.append(f"{machine.name}: {name} sends waitStartedAt.$ {payload.get('waitStartedAt.$')!r}, not "
                         "$$.Execution.StartTime: the wait's bound would not count from the start")
        for values in ([] if queued else sweep(template, machine, [WAIT])):  # queued: queue-wait-timeout
            if isinstance(values, str):
                found.append(values)
                break
            given = evaluate(template, machine.substitutions.get(WAIT), values)
            if given is None or given != values.get(WAIT):
                found.append(f"{machine.name}: with {_show(values)} the wait's bound is {given}, not MaxWaitSeconds")
                break
    return found


def queue_wait_timeout(template: dict, machine: Machine) -> list[str]:
    found = []
    name, acquire = machine.acquire()
    if not str(acquire.get("Resource", "")).endswith(".waitForTaskToken"):
        return []
    if acquire.get("TimeoutSeconds") != f"${{{WAIT}}}":
        return [f"{machine.name}: {name} waits in the queue, but its TimeoutSeconds is {acquire.get('TimeoutSeconds')!r}, "
                f"not ${{{WAIT}}}: nothing else ends that wait"]
    for values in sweep(template, machine, [WAIT]):
        if isinstance(values, str):
            return found + [values]
        timeout = evaluate(template, machine.substitutions.get(WAIT), values)
        if timeout is None:
            return found + [f"{machine.name}: cannot tell the acquire Task's TimeoutSeconds with {_show(values)}"]
        if timeout < 1:
            found.append(f"{machine.name}: with {_show(values)} the acquire Task's TimeoutSeconds is {timeout:g}, "
                         "not positive: CreateStateMachine refuses the definition")
        elif values.get(WAIT, 0) >= 1 and timeout != values.get(WAIT):
            found.append(f"{machine.name}: with {_show(values)} the acquire Task's TimeoutSeconds is {timeout:g}: "
                         "the wait in the queue is not MaxWaitSeconds")
    return found


def workload_bound(template: dict, machine: Machine) -> list[str]:
    name, state, task_name, task = machine.workload()
    if task_name is None:
        return [f"{machine.name}: the state after the acquire, {name!r} ({state.get('Type')}), is neither a Task nor a "
                "Parallel whose branch holds one Task: cannot tell its bound"]
    found = []
    # A retry starts the workload again while the attempt that failed may still run: the bound
    # (and the lease) would count one attempt of several. Only errors that prove nothing started.
    for retrier in task.get("Retry", []) or []:
        again = sorted(set(retrier.get("ErrorEquals", []) or []) - RETRIABLE_ERRORS)
        if again and retrier.get("MaxAttempts", 3) != 0:
            found.append(f"{machine.name}: {task_name} retries {again}, after which the attempt that failed may still "
                         f"run: the workload runs longer than its TimeoutSeconds, and beside itself")
    if name != task_name and state.get("Retry"):
        found.append(f"{machine.name}: {name} has a Retry: it runs the branch again while the pieces of the failed "
                     "run may still run, beyond the bound")
    bound = placeholder(task.get("TimeoutSeconds"))
    if bound is None:
        return found + [f"{machine.name}: {task_name}'s TimeoutSeconds is {task.get('TimeoutSeconds')!r}, not a "
                        "placeholder: the workload is unbounded, or its bound is not one the lease can add"]
    for values in sweep(template, machine, [bound]):
        if isinstance(values, str):
            return found + [values]
        seconds = evaluate(template, machine.substitutions.get(bound), values)
        if seconds is None or seconds < 1:
            return found + [f"{machine.name}: with {_show(values)} {task_name}'s TimeoutSeconds is {seconds}, not positive"]
    return found


def held_path(template: dict, machine: Machine) -> list[str]:
    found = []
    waits = machine.held_waits()
    if len(waits) != 1:
        return [f"{machine.name}: {len(waits)} Wait states ({sorted(waits)}), not one held path"]
    (hold, wait), = waits.items()
    if placeholder(wait.get("Seconds")) is None:
        found.append(f"{machine.name}: {hold}'s Seconds is {wait.get('Seconds')!r}, not a placeholder")
    name, state, task_name, task = machine.workload()
    states = machine.states
    catchers = state.get("Catch", []) or []
    if not any("States.ALL" in catcher.get("ErrorEquals", []) for catcher in catchers):
        found.append(f"{machine.name}: {name} catches no States.ALL: an error out of the workload fails the execution "
                     "without holding and releasing the lock")
    # A child started by the workload Task runs on after the Task's error (its TimeoutSeconds ends
    # the Task, not the child) until it is stopped, or read as ended.
    child = "runs" if ":states:::states:startExecution" in str(state.get("Resource", "")) else "stopped"
    for catcher in catchers:
        if set(catcher.get("ErrorEquals", [])) <= NO_START_ERRORS:
            continue  # no child was started: released at once
        leak = release_without_hold(states, catcher.get("Next"), hold, child)
        if leak:
            found.append(f"{machine.name}: after an error in {catcher.get('ErrorEquals')} out of {name}: "
                         f"{' -> '.join(leak[0])} {leak[1]} (the held path is {hold})")
    if state.get("Type") == "Parallel" and task_name:
        found += _workload_task_catchers(machine, name, state, task_name, task, hold)
    return found


def _workload_task_catchers(machine: Machine, name: str, parallel: dict, task_name: str, task: dict,
                            hold: str) -> list[str]:
    """The catchers of the Task in the Parallel's branch. A way out through a Fail state fails the
    branch: the Parallel's Catch takes it (to the held path, above). A way to the branch's normal
    end is an immediate release only with a marker that the Choice after the Parallel tests, and
    only for a catcher behind ones that together list exactly the errors after which the
    invocation may still run (MAY_RUN_ERRORS), each of which holds."""
    found = []
    branch = next((b.get("States", {}) for b in parallel.get("Branches", []) or []
                   if task_name in all_states(b.get("States", {}))), {})
    branch = all_states(branch)
    parallel_catchers = parallel.get("Catch", []) or []
    after = machine.states.get(parallel.get("Next"), {}) or {}
    catchers = task.get("Catch", []) or []
    releasing: dict[int, list[str]] = {}  # catcher -> a path to its immediate release
    for index, catcher in enumerate(catchers):
        errors = catcher.get("ErrorEquals", []) or []
        leaves, ends = branch_outcomes(branch, catcher.get("Next"))
        for path, raised in leaves:
            for error in sorted(raised or errors):  # a Fail's ErrorPath: the error caught
                if first_catcher(parallel_catchers, error) is None:
                    found.append(f"{machine.name}: after {error} {task_name}'s Catch on {errors} leaves the branch by "
                                 f"{' -> '.join(path)}, which {name} does not catch: the execution fails without "
                                 f"holding the lock in {hold}")
        for path in ends:
            marker, facts = _marker_facts(parallel, branch.get(path[-1], {}) or {})
            leak = release_without_hold(machine.states, parallel.get("Next"), hold, "stopped", facts)
            if not leak:
                continue
            route = choice_moves(after, facts) if after.get("Type") == "Choice" else []
            shown = " -> ".join(path + [name] + leak[0])
            if not (marker and len(route) == 1 and route[0][1] == "rule"):
                found.append(f"{machine.name}: {task_name}'s Catch on {errors} ends the branch normally "
                             f"({'marker ' + marker if marker else 'no marker'}) and {parallel.get('Next')} does not "
                             f"route it by a rule on its marker: {shown} {leak[1]}, as if the workload succeeded")
            else:
                releasing.setdefault(index, path + [name] + leak[0])
    may_run = set(MAY_RUN_ERRORS)
    for index, path in releasing.items():
        errors = catchers[index].get("ErrorEquals", [])
        ahead = catchers[:index]
        listed = set().union(*(set(c.get("ErrorEquals", []) or []) for c in ahead))
        if any(i in releasing for i in range(index)):
            found.append(f"{machine.name}: {task_name}'s Catch on {errors} releases at once ({' -> '.join(path)}), "
                         "behind a catcher that releases at once too: the one immediate release follows catchers "
                         "that hold")
        elif listed != may_run:
            missing, extra = sorted(may_run - listed), sorted(listed - may_run)
            what = (f"{missing} reach it, after which the invocation may still run" if missing
                    else f"they also list {extra}: not the documented split (timing_relations' MAY_RUN_ERRORS)")
            found.append(f"{machine.name}: {task_name}'s Catch on {errors} releases at once ({' -> '.join(path)}), but "
                         f"the catchers in front of it list {sorted(listed)}, not exactly {sorted(may_run)}: {what}")
    return found


def lease_is_bound_sum(template: dict, machine: Machine) -> list[str]:
    found = []
    bound = placeholder(machine.workload()[3].get("TimeoutSeconds"))
    waits = machine.held_waits()
    held = placeholder(next(iter(waits.values())).get("Seconds")) if len(waits) == 1 else None
    if bound is None or held is None:
        return [f"{machine.name}: no workload bound or no held path to build the lease from (workload-bound, held-path)"]
    expected = sorted([bound, held, MARGIN])
    acquires = {n: s for n, s in all_states(machine.states).items()
                if (s.get("Parameters", {}) or {}).get("FunctionName") == "${AcquireLockFunctionArn}"}
    if not acquires:
        found.append(f"{machine.name}: no acquire (a Task invoking ${{AcquireLockFunctionArn}})")
    for name, state in acquires.items():
        payload = (state.get("Parameters", {}) or {}).get("Payload", {}) or {}
        if "leaseSeconds.$" not in payload:
            found.append(f"{machine.name}: {name} passes leaseSeconds {payload.get('leaseSeconds')!r}, not the lease "
                         "expression leaseSeconds.$: its lease follows no bound of this definition")
            continue
        try:
            terms = lease_terms(payload["leaseSeconds.$"])
        except ValueError as error:
            found.append(f"{machine.name}: {name}: {error}")
            continue
        if sorted(terms) != expected:
            found.append(f"{machine.name}: {name}'s lease {payload['leaseSeconds.$']!r} adds {' + '.join(terms)}, not "
                         f"the workload's bound ${{{bound}}} ({machine.workload()[2]}'s TimeoutSeconds) + the held "
                         f"path ${{{held}}} + ${{{MARGIN}}}")
    return found


def _lease_expressions(machine: Machine) -> list[list[str]]:
    found = []
    for state in all_states(machine.states).values():
        expression = (((state.get("Parameters", {}) or {}).get("Payload", {}) or {}).get("leaseSeconds.$"))
        if isinstance(expression, str):
            try:
                found.append(lease_terms(expression))
            except ValueError:
                continue  # lease-is-bound-sum
    return found


def lease_within_contract(template: dict, machine: Machine) -> list[str]:
    found = []
    for terms in _lease_expressions(machine):
        names = [term for term in terms if not re.fullmatch(r"-?\d+", term)]
        lowest = highest = None
        for values in sweep(template, machine, names):
            if isinstance(values, str):
                return [values]
            numbers = [evaluate(template, machine.substitutions.get(t), values) if t in names else float(t) for t in terms]
            if None in numbers:
                return [f"{machine.name}: cannot tell the lease {' + '.join(terms)} with {_show(values)}"]
            lease = sum(numbers)
            if lowest is None or lease < lowest[0]:
                lowest = (lease, values)
            if highest is None or lease > highest[0]:
                highest = (lease, values)
        if lowest and lowest[0] < 1:
            found.append(f"{machine.name}: with {_show(lowest[1])} the lease is {lowest[0]:.0f} s, below 1")
        if highest and highest[0] > ACQUIRE_MAX_LEASE_SECONDS:
            found.append(f"{machine.name}: with {_show(highest[1])} the lease is {highest[0]:.0f} s, above the "
                         f"{ACQUIRE_MAX_LEASE_SECONDS} s acquire-lock accepts: every acquire would be refused")
    return found


def margin_covers_retries(template: dict, machine: Machine) -> list[str]:
    name, state, task_name, task = machine.workload()
    waits = machine.held_waits()
    if task_name is None or len(waits) != 1:
        return []  # workload-bound and held-path say why
    hold = next(iter(waits))
    on_path = {name, task_name}
    for branch in state.get("Branches", []) or []:  # the Task's catchers lead on inside it
        on_path |= set(all_states(branch.get("States", {})))
    for catcher in state.get("Catch", []) or []:
        if not set(catcher.get("ErrorEquals", [])) <= NO_START_ERRORS:
            on_path |= states_before(machine.states, catcher.get("Next"), hold)
    every = all_states(machine.states)
    pauses = {n: sum(total_pauses(r) for r in every[n].get("Retry", []) or []) for n in sorted(on_path) if n in every}
    # Each attempt of a Task on the path (but the workload's, whose bound is
    # the lease's first term) takes up to its own TimeoutSeconds; an AWS SDK
    # call without one is unbounded.
    for n in sorted(on_path - {task_name}):
        step = every.get(n, {})
        if step.get("Type") != "Task" or ":states:::aws-sdk:" not in str(step.get("Resource", "")):
            continue
        timeout = step.get("TimeoutSeconds")
        if not isinstance(timeout, int):
            return [f"{machine.name}: {n} is on the way from the grant to the held path with no TimeoutSeconds: "
                    f"one hung attempt outlasts any margin"]
        attempts = 1 + sum(r.get("MaxAttempts", 3) for r in step.get("Retry", []) or [])
        pauses[n] = pauses.get(n, 0) + attempts * timeout
    needed = sum(pauses.values()) + LAMBDA_INIT_SECONDS
    lowest = None
    for values in sweep(template, machine, [MARGIN]):
        if isinstance(values, str):
            return [values]
        margin = evaluate(template, machine.substitutions.get(MARGIN), values)
        if margin is not None and (lowest is None or margin < lowest[0]):
            lowest = (margin, values)
    if lowest is None:
        return [f"{machine.name}: cannot tell LeaseMarginSeconds' smallest value"]
    if lowest[0] < needed:
        spent = ", ".join(f"{n} {p:.0f} s" for n, p in pauses.items() if p)
        return [f"{machine.name}: LeaseMarginSeconds may be {lowest[0]:.0f} s, less than the {needed:.0f} s between the "
                f"grant and the held path beyond the bounds (retry pauses: {spent or 'none'}; Lambda Init "
                f"{LAMBDA_INIT_SECONDS} s): the lease may end while the work still runs"]
    return []


_FORMAT = re.compile(r"States\.Format\('(?P<prefix>[^']*)\{\}-\{\}',\s*(?P<args>.*)\)")


def _policy_statements(properties: dict) -> list[dict]:
    statements = []
    for policy in properties.get("Policies", []) or []:
        if isinstance(policy, dict):
            statements += policy.get("Statement", []) or []
    return statements


def stop_target(template: dict, machine: Machine) -> list[str]:
    found = []
    every = all_states(machine.states)
    calls = {n: (s, action) for n, s in every.items()
             for resource, action in ((STOP_RESOURCE, "states:StopExecution"), (DESCRIBE_RESOURCE, "states:DescribeExecution"))
             if s.get("Resource") == resource}
    if not calls:
        return []
    starts = {n: s for n, s in every.items() if ":states:::states:startExecution" in str(s.get("Resource", ""))}
    if len(starts) != 1:
        return [f"{machine.name}: stops or reads a child, but starts {len(starts)} (not one) with startExecution"]
    (start_name, start), = starts.items()
    start_parameters = start.get("Parameters", {}) or {}
    name_format = _FORMAT.fullmatch(str(start_parameters.get("Name.$", "")))
    target = machine.substitutions.get(placeholder(start_parameters.get("StateMachineArn")) or "")
    for call_name, (call, action) in calls.items():
        arn_format = _FORMAT.fullmatch(str((call.get("Parameters", {}) or {}).get("ExecutionArn.$", "")))
        prefix = placeholder(arn_format.group("prefix")) if arn_format else None
        if not (arn_format and name_format and name_format.group("prefix") == "" and prefix
                and arn_format.group("args") == name_format.group("args")):
            found.append(f"{machine.name}: {call_name}'s ExecutionArn.$ is not States.Format('${{Prefix}}{{}}-{{}}', ...) "
                         f"with the arguments of {start_name}'s Name.$: it does not name the child it started")
            continue
        built = machine.substitutions.get(prefix)
        sub = built.get("Fn::Sub") if isinstance(built, dict) else None
        text, variables = (sub if isinstance(sub, list) and len(sub) == 2 else (sub, {})) if sub else (None, {})
        wanted = "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"
        name_variable = re.fullmatch(re.escape(wanted) + r"\$\{(\w+)\}:", str(text or ""))
        source = (variables or {}).get(name_variable.group(1)) if name_variable else None
        if not (name_variable and isinstance(target, dict) and source == {"Fn::Select": [6, {"Fn::Split": [":", target]}]}):
            found.append(f"{machine.name}: ${{{prefix}}} is {built!r}, not {wanted}<the name of {target!r}>:, "
                         f"{call_name} would name another state machine's execution, or none")
            continue
        granted = [s for s in _policy_statements(machine.properties)
                   if s.get("Effect") == "Allow" and action in (
                       s.get("Action") if isinstance(s.get("Action"), list) else [s.get("Action")])]
        if not any(s.get("Resource") == {"Fn::Sub": [text + "*", variables]} for s in granted):
            found.append(f"{machine.name}: no statement grants {action} on {text}* (with {variables!r}): "
                         f"{call_name} ({call.get('Resource')}) is refused")
    for call_name, (call, action) in calls.items():
        parameters = call.get("Parameters", {}) or {}
        if action == "states:StopExecution" and ({"Error", "Cause", "Error.$", "Cause.$"} & set(parameters)):
            found.append(f"{machine.name}: {call_name} sends an Error or Cause: on a target encrypted with a KMS key "
                         "that needs KMS rights the role lacks, and the stop fails")
        if action == "states:DescribeExecution" and parameters.get("IncludedData") != "METADATA_ONLY":
            found.append(f"{machine.name}: {call_name} reads the child's input and output (no IncludedData "
                         "METADATA_ONLY): KMS rights on an encrypted target, and up to 256 KiB of data")
    # An Express child cannot be stopped (nor named by an execution: ARN); it
    # ends within five minutes of its start, which the Task's bound must cover.
    minimum = (template.get("Parameters", {}).get(placeholder(start.get("TimeoutSeconds")) or "", {}) or {}).get("MinValue")
    if not isinstance(minimum, (int, float)) or minimum < EXPRESS_SECONDS:
        found.append(f"{machine.name}: {start_name}'s TimeoutSeconds may be {minimum!r} s, under the {EXPRESS_SECONDS} s "
                     "an Express child runs: it would time out while the child runs on, unstoppable")
    return found


# An Express workflow's execution runs at most five minutes (Step Functions quotas).
EXPRESS_SECONDS = 300


RULES: dict[str, Callable[[dict, Machine], list[str]]] = {
    "no-execution-timeout": no_execution_timeout,
    "wait-bound": wait_bound,
    "queue-wait-timeout": queue_wait_timeout,
    "workload-bound": workload_bound,
    "held-path": held_path,
    "lease-is-bound-sum": lease_is_bound_sum,
    "lease-within-contract": lease_within_contract,
    "margin-covers-retries": margin_covers_retries,
    "stop-target": stop_target,
}


def problems(template: dict, read: Callable[[str], str]) -> list[tuple[str, str]]:
    found, unreadable = machines(template, read)
    result = [("definitions", message) for message in unreadable]
    for rule, check in RULES.items():
        for machine in found:
            result += [(rule, message) for message in check(template, machine)]
    return result


# -- self-test: mutated copies of the shipped template and definitions --------------------------
def _shipped() -> tuple[dict, dict[str, str]]:
    template = load(ROOT / "template.yaml")
    texts = {}
    for resource in template["Resources"].values():
        uri = (resource.get("Properties", {}) or {}).get("DefinitionUri")
        if resource.get("Type") == "AWS::Serverless::StateMachine":
            texts[uri] = (ROOT / uri).read_text()
    return template, texts


LOCKED = "statemachine/locked-workflow.asl.json"
QUEUED = "statemachine/queued-workflow.asl.json"
SKIP = "statemachine/skip-if-running.asl.json"
ATTACH = "statemachine/attach-existing.asl.json"


def _text(file: str, find: str, replace: str) -> Callable[[dict, dict], None]:
    def change(template: dict, texts: dict) -> None:
        if texts[file].count(find) != 1:
            raise AssertionError(f"self-test: {find!r} is not in {file} exactly once")
        texts[file] = texts[file].replace(find, replace)
    return change


def _template(change: Callable[[dict], None]) -> Callable[[dict, dict], None]:
    return lambda template, texts: change(template)


def _substitution(machine: str, key: str, value: Any) -> Callable[[dict, dict], None]:
    return _template(lambda t: t["Resources"][machine]["Properties"]["DefinitionSubstitutions"].__setitem__(key, value))


_LEASE = "States.MathAdd(States.MathAdd(${WorkloadTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"
_ATTACH_LEASE = "States.MathAdd(States.MathAdd(${TargetTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})"
_PARALLEL_CATCH = '"ErrorEquals": ["States.ALL"],\n          "Next": "Wait For Workload To Stop"'
_STOP_STATEMENT = ("Resources", "AttachedWorkflowStateMachine", "Properties", "Policies", 0, "Statement")


_SECOND_CATCHER = '{\n                  "ErrorEquals": ["States.ALL"],\n                  "Next": "Workload Ended With Error"\n                }'
_ENDED = ('{ "Variable": "$.sfnLockTarget.Status", "StringEquals": "ABORTED" }\n          ],\n'
          '          "Next": "Wait For Target To Stop"')


def _chain(*changes: Callable[[dict, dict], None]) -> Callable[[dict, dict], None]:
    def change(template: dict, texts: dict) -> None:
        for one in changes:
            one(template, texts)
    return change


def _swap_workload_catchers(file: str) -> Callable[[dict, dict], None]:
    """The workload Task's two catchers in the other order, as JSON (the text has no room for it)."""
    def change(template: dict, texts: dict) -> None:
        definition = parse_definition(texts[file])
        task = definition["States"]["Run Workload Under Lock"]["Branches"][0]["States"]["Run Workload"]
        task["Catch"].reverse()
        texts[file] = json.dumps(definition, indent=2)
    return change


def _stop_grant(template: dict) -> dict:
    node: Any = template
    for key in _STOP_STATEMENT:
        node = node[key]
    return next(s for s in node if "states:StopExecution" in s.get("Action", []))


# rule -> [(label, change)], each of which that rule must reject.
SELF_TEST_CASES: dict[str, list[tuple[str, Callable[[dict, dict], None]]]] = {
    "no-execution-timeout": [
        ("a top-level TimeoutSeconds put back (the old ${ExecutionTimeoutSeconds}, here 3600)",
         _text(LOCKED, '  "StartAt": "Acquire Lock",', '  "TimeoutSeconds": 3600,\n  "StartAt": "Acquire Lock",')),
        ("a top-level TimeoutSeconds of TargetTimeoutSeconds in the attach variant (a wait cuts the child short)",
         _text(ATTACH, '  "StartAt": "Acquire Lock",', '  "TimeoutSeconds": ${TargetTimeoutSeconds},\n  "StartAt": "Acquire Lock",')),
        ("a HeartbeatSeconds on the polling acquire",
         _text(LOCKED, '"ResultPath": ${LockResultPath},', '"ResultPath": ${LockResultPath},\n      "HeartbeatSeconds": 60,')),
    ],
    "wait-bound": [
        ("the polling acquire without maxWaitSeconds",
         _text(LOCKED, ',\n          "maxWaitSeconds": ${MaxWaitSeconds}', "")),
        ("the wait counted from the acquire's own start",
         _text(LOCKED, '"waitStartedAt.$": "$$.Execution.StartTime"',
               '"waitStartedAt.$": "$$.State.EnteredTime"')),
        ("LockWaitTimeout retried", _text(LOCKED, '"ErrorEquals": ["LockUnavailable"],',
                                          '"ErrorEquals": ["LockUnavailable", "LockWaitTimeout"],')),
        ("maxWaitSeconds a fixed 60 s", _substitution("LockedWorkflowStateMachine", "MaxWaitSeconds", 60)),
    ],
    "queue-wait-timeout": [
        ("TimeoutSeconds !Ref MaxWaitSeconds, whose MinValue is 0",
         _substitution("QueuedWorkflowStateMachine", "MaxWaitSeconds", {"Ref": "MaxWaitSeconds"})),
        ("the !If's branches swapped", _substitution("QueuedWorkflowStateMachine", "MaxWaitSeconds",
                                                     {"Fn::If": ["MaxWaitIsZero", {"Ref": "MaxWaitSeconds"}, 1]})),
        ("the condition comparing with 1",
         _template(lambda t: t["Conditions"].__setitem__("MaxWaitIsZero", {"Fn::Equals": [{"Ref": "MaxWaitSeconds"}, "1"]}))),
        ("no TimeoutSeconds on the queued acquire", _text(QUEUED, '\n      "TimeoutSeconds": ${MaxWaitSeconds},', "")),
    ],
    "workload-bound": [
        ("the workload Task without TimeoutSeconds", _text(LOCKED, '\n              "TimeoutSeconds": ${WorkloadTimeoutSeconds},', "")),
        ("the attach Task without TimeoutSeconds", _text(ATTACH, '\n      "TimeoutSeconds": ${TargetTimeoutSeconds},', "")),
        ("WorkloadTimeoutSeconds substituted by 0", _substitution("SkipIfRunningStateMachine", "WorkloadTimeoutSeconds", 0)),
        ("the workload Task retrying Lambda.ServiceException (it may have started)",
         _text(LOCKED, '"ErrorEquals": ["Lambda.TooManyRequestsException"],',
               '"ErrorEquals": ["Lambda.TooManyRequestsException", "Lambda.ServiceException"],')),
        ("the attach Task retrying States.Timeout (a second child's time on top of the first)",
         _text(ATTACH, '"StepFunctions.ExecutionLimitExceededException"\n          ],\n          "IntervalSeconds"',
               '"StepFunctions.ExecutionLimitExceededException",\n            "States.Timeout"\n          ],\n          "IntervalSeconds"')),
        ("a Retry on the workload Parallel",
         _text(QUEUED, '"OutputPath": "$[0]",', '"OutputPath": "$[0]",\n      "Retry": [{"ErrorEquals": ["States.ALL"]}],')),
    ],
    "held-path": [
        ("the Parallel's Catch sending States.ALL straight to Release Lock After Failure",
         _text(LOCKED, _PARALLEL_CATCH, '"ErrorEquals": ["States.ALL"],\n          "Next": "Release Lock After Failure"')),
        ("the Parallel's Catch narrowed to States.TaskFailed (a re-raised States.Timeout fails the execution unheld)",
         _text(SKIP, _PARALLEL_CATCH, '"ErrorEquals": ["States.TaskFailed"],\n          "Next": "Wait For Workload To Stop"')),
        ("the may-run catcher pointed at the ended marker",
         _text(QUEUED, '"Lambda.AWSLambdaException"\n                  ],\n                  "Next": "Check Workload Error Cause"',
               '"Lambda.AWSLambdaException"\n                  ],\n                  "Next": "Workload Ended With Error"')),
        ("the may-run re-raise falling back to the ended marker when the error has no Cause",
         _text(LOCKED, '"Default": "Raise Workload Error Name Again"', '"Default": "Workload Ended With Error"')),
        ("the may-run errors ending the branch with a marker the Choice does not test (success release)",
         _text(LOCKED, '"Default": "Raise Workload Error Name Again"', '"Default": "Workload May Still Run"\n            },\n'
               '            "Workload May Still Run": {\n              "Type": "Pass",\n              "Parameters": '
               '{"sfnLockWorkloadMayRun.$": "$"},\n              "End": true')),
        ("States.Timeout left to the proven-end catcher",
         _text(SKIP, '"States.Timeout",\n                    "States.HeartbeatTimeout",', '"States.HeartbeatTimeout",')),
        ("States.Timeout moved behind States.ALL (its catcher never reached)",
         _chain(_text(LOCKED, '"States.Timeout",\n                    "States.HeartbeatTimeout",', '"States.HeartbeatTimeout",'),
                _text(LOCKED, _SECOND_CATCHER, _SECOND_CATCHER + ',\n                {\n                  "ErrorEquals": '
                      '["States.Timeout"],\n                  "Next": "Check Workload Error Cause"\n                }'))),
        ("the catchers' order swapped (States.ALL first)",
         _swap_workload_catchers(QUEUED)),
        ("the ended marker's Choice testing another field (released as a success)",
         _text(SKIP, '"Variable": "$.sfnLockWorkloadError",', '"Variable": "$.workloadError",')),
        ("the attach Task's States.ALL released at once",
         _text(ATTACH, '"ErrorEquals": ["States.ALL"],\n          "Next": "Stop Target Execution"',
               '"ErrorEquals": ["States.ALL"],\n          "Next": "Release Lock After Failure"')),
        ("the attach Task's States.ALL held without stopping the child",
         _text(ATTACH, '"ErrorEquals": ["States.ALL"],\n          "Next": "Stop Target Execution"',
               '"ErrorEquals": ["States.ALL"],\n          "Next": "Wait For Target To Stop"')),
        ("ExecutionDoesNotExist of the stop released at once",
         _text(ATTACH, '"ErrorEquals": ["Sfn.ExecutionDoesNotExistException"],\n          "ResultPath": null,\n          "Next": "Wait For Target To Stop"',
               '"ErrorEquals": ["Sfn.ExecutionDoesNotExistException"],\n          "ResultPath": null,\n          "Next": "Release Lock After Failure"')),
        ("the stop's failure released at once, without reading the child's status",
         _text(ATTACH, '"ResultPath": null,\n          "Next": "Describe Target Execution"',
               '"ResultPath": null,\n          "Next": "Release Lock After Failure"')),
        ("the stop's failure held without reading the child's status",
         _text(ATTACH, '"ResultPath": null,\n          "Next": "Describe Target Execution"',
               '"ResultPath": null,\n          "Next": "Wait For Target To Stop"')),
        ("a child read as RUNNING held and then released",
         _text(ATTACH, '"StringEquals": "ABORTED" }', '"StringEquals": "ABORTED" },\n            { "Variable": "$.sfnLockTarget.Status", "StringEquals": "RUNNING" }')),
        ("a child of a status added later held and then released (the Default to the Wait)",
         _text(ATTACH, '      "Default": "Check Whether Error Has Cause"\n    },\n    "Wait For Target To Stop"',
               '      "Default": "Wait For Target To Stop"\n    },\n    "Wait For Target To Stop"')),
        ("the child's status read into another field than the Choice tests",
         _text(ATTACH, '"ResultPath": "$.sfnLockTarget",', '"ResultPath": "$.target",')),
        ("a failed read of the child's status held and then released",
         _text(ATTACH, '"ResultPath": null,\n          "Next": "Check Whether Error Has Cause"\n        }\n      ],\n      "Next": "Check Whether Target Still Runs"',
               '"ResultPath": null,\n          "Next": "Wait For Target To Stop"\n        }\n      ],\n      "Next": "Check Whether Target Still Runs"')),
    ],
    "lease-is-bound-sum": [
        ("the lease from MaxWaitSeconds, not the workload's bound",
         _text(LOCKED, _LEASE, _LEASE.replace("${WorkloadTimeoutSeconds}", "${MaxWaitSeconds}"))),
        ("the attach lease from the lock's wait", _text(ATTACH, _ATTACH_LEASE, _ATTACH_LEASE.replace("${TargetTimeoutSeconds}", "${MaxWaitSeconds}"))),
        ("the lease without the held path", _text(SKIP, _LEASE, "States.MathAdd(${WorkloadTimeoutSeconds}, ${LeaseMarginSeconds})")),
        ("the lease without its margin", _text(QUEUED, _LEASE, "States.MathAdd(${WorkloadTimeoutSeconds}, ${WorkloadMaxRunSeconds})")),
        ("the held path counted twice, no workload bound",
         _text(LOCKED, _LEASE, _LEASE.replace("${WorkloadTimeoutSeconds}", "${WorkloadMaxRunSeconds}"))),
        ("no lease passed (DefaultLeaseSeconds applies)", _text(SKIP, f'"leaseSeconds.$": "{_LEASE}"', '"leaseSeconds": 900')),
    ],
    "lease-within-contract": [
        ("TargetTimeoutSeconds up to 365 days",
         _template(lambda t: t["Parameters"]["TargetTimeoutSeconds"].update(MaxValue=31536000))),
        ("WorkloadMaxRunSeconds without a MaxValue", _template(lambda t: t["Parameters"]["WorkloadMaxRunSeconds"].pop("MaxValue"))),
    ],
    "margin-covers-retries": [
        ("LeaseMarginSeconds down to 0", _template(lambda t: t["Parameters"]["LeaseMarginSeconds"].update(MinValue=0))),
        ("the stop retried 20 times",
         _text(ATTACH, '"MaxDelaySeconds": 20,\n          "JitterStrategy": "FULL",\n          "MaxAttempts": 6\n        }\n      ],\n      "Catch": [\n        {\n          "ErrorEquals": ["Sfn.',
               '"MaxDelaySeconds": 20,\n          "JitterStrategy": "FULL",\n          "MaxAttempts": 20\n        }\n      ],\n      "Catch": [\n        {\n          "ErrorEquals": ["Sfn.')),
        ("the stop's attempts unbounded (no TimeoutSeconds)",
         _text(ATTACH, '      "TimeoutSeconds": 5,\n      "ResultPath": null,', '      "ResultPath": null,')),
        ("the stop's attempts of 20 s each",
         _text(ATTACH, '      "TimeoutSeconds": 5,\n      "ResultPath": null,', '      "TimeoutSeconds": 20,\n      "ResultPath": null,')),
        ("the child's status read with six tries (19 s of pauses, not 7)",
         _text(ATTACH, '"MaxDelaySeconds": 4,\n          "JitterStrategy": "FULL",\n          "MaxAttempts": 3',
               '"MaxDelaySeconds": 4,\n          "JitterStrategy": "FULL",\n          "MaxAttempts": 6')),
        ("the workload Task's throttle retried 6 times, over the margin with the old minimum of 60 s",
         _chain(_template(lambda t: t["Parameters"]["LeaseMarginSeconds"].update(MinValue=60)),
                _text(SKIP, '"JitterStrategy": "FULL",\n                  "MaxAttempts": 3',
                      '"MaxDelaySeconds": 20,\n                  "JitterStrategy": "FULL",\n                  "MaxAttempts": 6'))),
    ],
    "stop-target": [
        ("the stop without the redrive count",
         _text(ATTACH, "States.Hash($$.Execution.Id, 'SHA-256'), $$.Execution.RedriveCount)\"\n      },\n      \"TimeoutSeconds\": 5,\n      \"ResultPath\": null",
               "States.Hash($$.Execution.Id, 'SHA-256'), 0)\"\n      },\n      \"TimeoutSeconds\": 5,\n      \"ResultPath\": null")),
        ("the prefix of this state machine's own executions", _substitution(
            "AttachedWorkflowStateMachine", "TargetExecutionArnPrefix",
            {"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:sfn-lock-attached:"})),
        ("the prefix of a stateMachine, not its executions", _template(lambda t: t["Resources"]["AttachedWorkflowStateMachine"][
            "Properties"]["DefinitionSubstitutions"]["TargetExecutionArnPrefix"]["Fn::Sub"].__setitem__(
                0, "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${TargetName}:"))),
        ("states:StopExecution not granted", _template(lambda t: _stop_grant(t).update(Action=["states:DescribeExecution"]))),
        ("states:DescribeExecution not granted (the read of the child's status refused)",
         _template(lambda t: _stop_grant(t).update(Action=["states:StopExecution"]))),
        ("the read of the child's status naming the first run's child (no redrive count)",
         _text(ATTACH, "States.Hash($$.Execution.Id, 'SHA-256'), $$.Execution.RedriveCount)\",\n        \"IncludedData\"",
               "States.Hash($$.Execution.Id, 'SHA-256'), 0)\",\n        \"IncludedData\"")),
        ("the stop sending an Error (KMS rights on an encrypted target)",
         _text(ATTACH, "$$.Execution.RedriveCount)\"\n      },\n      \"TimeoutSeconds\": 5,\n      \"ResultPath\": null",
               "$$.Execution.RedriveCount)\",\n        \"Error\": \"x\"\n      },\n      \"TimeoutSeconds\": 5,\n      \"ResultPath\": null")),
        ("the read of the child's status with its input and output",
         _text(ATTACH, ',\n        "IncludedData": "METADATA_ONLY"', '')),
        ("TargetTimeoutSeconds down to 60 (an Express child outlives it)",
         _template(lambda t: t["Parameters"]["TargetTimeoutSeconds"].update(MinValue=60))),
        ("states:StopExecution on another state machine's executions", _template(lambda t: _stop_grant(t).update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:other:*"}))),
    ],
}


def self_test() -> int:
    template, texts = _shipped()
    failures = 0
    good = problems(template, lambda uri: texts[uri])
    if good:
        failures += 1
        print(f"FAIL rejects the shipped template and definitions: {good}")
    else:
        print("ok   accepts the shipped template and definitions")
    for rule, cases in SELF_TEST_CASES.items():
        for label, change in cases:
            mutated_template, mutated_texts = copy.deepcopy(template), dict(texts)
            change(mutated_template, mutated_texts)
            found = [message for found_rule, message in problems(mutated_template, lambda uri: mutated_texts[uri])
                     if found_rule == rule]
            if found:
                print(f"ok   {rule} rejects {label}: {found[0]}")
            else:
                failures += 1
                print(f"FAIL {rule} did not reject {label}")
    for rule in sorted(set(RULES) - set(SELF_TEST_CASES)):
        failures += 1
        print(f"FAIL {rule} has no self-test case")
    total = 1 + sum(len(cases) for cases in SELF_TEST_CASES.values())
    print(f"timing relations self-test: {total - failures} of {total} as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    try:
        found = problems(load(path), lambda uri: (path.parent / uri).read_text())
    except TemplateError as error:
        found = [("template", str(error))]
    for rule, message in found:
        print(f"timing relations: {rule}: {message}")
    if not found:
        print(f"timing relations: {path}: {len(RULES)} rules hold for every accepted parameter value")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
