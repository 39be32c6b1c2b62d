"""The cleanup sweep's wiring in template.yaml, checked against what its code needs.

- The event source mapping reports failures per record (ReportBatchItemFailures),
  so one record that keeps failing does not hold up the rest of its batch.
- The rule matches documented event samples of every terminal status of the
  stack's state machine, and not RUNNING, another state machine or another source.
- The rule's target sends only what the sweep reads: its InputTransformer,
  filled in from a documented ABORTED event, is an EventBridge envelope whose
  detail has executionArn and status, and no execution input or output.
- Every state machine the stack deploys (LockedWorkflowStateMachine,
  SkipIfRunningStateMachine, QueuedWorkflowStateMachine, the attach variant) is
  swept (an ended queued execution may also have left a queue entry): the rule's
  stateMachineArn list, SWEPT_STATE_MACHINE_ARNS and the DescribeExecution
  grant each name it.
- The function gets the settings the code reads (crates/sfn-lock/src/sweep_policy.rs,
  lambda.rs) and the calls it makes are allowed: DescribeExecution (every end
  is confirmed), SendMessage on the cleanup queue (early events go back).

Usage: sweep_wiring.py template.yaml | --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

from cfn_template import load

# The documented ABORTED example (Step Functions' EventBridge integration page).
SAMPLE_EVENT = {
    "version": "0", "id": "315c1398-40ff-a850-213b-158f73e60175",
    "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
    "account": "123456789012", "time": "2019-02-26T19:42:21Z", "region": "us-east-2",
    "resources": ["arn:aws:states:us-east-2:123456789012:execution:state-machine-name:execution-name"],
    "detail": {
        "executionArn": "arn:aws:states:us-east-2:123456789012:execution:state-machine-name:execution-name",
        "stateMachineArn": "arn:aws:states:us-east-2:123456789012:stateMachine:state-machine",
        "name": "execution-name", "status": "ABORTED", "startDate": 1551225014968,
        "stopDate": 1551225017576, "input": "{\"secret\": 1}", "inputDetails": {"included": True},
        "output": None, "outputDetails": None,
    },
}
ENV = {"LOCK_TABLE_NAME", "SWEPT_STATE_MACHINE_ARNS", "SWEEP_GRACE_SECONDS", "CLEANUP_QUEUE_URL",
       "ATTACHED_STATE_MACHINE_ARN", "TARGET_STATE_MACHINE_ARN"}
ACTIONS = {"dynamodb:Query", "dynamodb:UpdateItem", "states:DescribeExecution", "sqs:SendMessage"}
# What each lock function's code calls (dynamodb.rs: update_item; the sweep adds
# query, describe_execution and send_message, and stop_execution for the attach child).
CALLS = {"AcquireLockFunction": {"dynamodb:UpdateItem"}, "ReleaseLockFunction": {"dynamodb:UpdateItem"},
         "ReleaseExecutionLocksFunction": ACTIONS}


def unconditional_actions(function: dict[str, Any]) -> set[str]:
    granted: set[str] = set()
    for policy in function["Properties"]["Policies"]:
        for statement in policy.get("Statement", []):
            if "Fn::If" in statement:
                continue  # what every deployment needs must not depend on a condition
            actions = statement.get("Action", [])
            granted.update([actions] if isinstance(actions, str) else actions)
    return granted


def path_value(event: dict[str, Any], path: str) -> Any:
    value: Any = event
    for part in path.removeprefix("$.").split("."):
        value = value[part]
    return value


TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def matches(pattern: Any, event: Any) -> bool:
    """EventBridge's matching for the pattern forms the rule uses: nested
    objects, and lists of exact values. A value we cannot resolve (an ARN from
    !Ref) stands for the stack's own state machines, written <Name>."""
    if isinstance(pattern, dict):
        return isinstance(event, dict) and all(
            key in event and matches(value, event[key]) for key, value in pattern.items())
    return event in [resolve(value) for value in pattern]


def resolve(value: Any) -> Any:
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return value


def sample(status: str, state_machine: str = "<LockedWorkflowStateMachine>", source: str = "aws.states") -> dict:
    event = copy.deepcopy(SAMPLE_EVENT)
    event["source"] = source
    event["detail"].update(status=status, stateMachineArn=state_machine)
    return event


def pattern_problems(pattern: dict) -> list[str]:
    """The rule against documented event samples: every terminal status of the
    stack's state machine matches; RUNNING, another state machine and another
    source do not."""
    pattern = copy.deepcopy(pattern)
    arns = pattern.get("detail", {}).get("stateMachineArn")
    if isinstance(arns, dict) and "Fn::Split" in arns:
        # !Split [",", !Join ["", [!Ref Locked, ...]]]: the first element is the stack's machine.
        pattern["detail"]["stateMachineArn"] = [arns["Fn::Split"][1]["Fn::Join"][1][0]]
    found = [f"the rule misses a {status} end" for status in TERMINAL if not matches(pattern, sample(status))]
    strangers = {
        "a RUNNING execution": sample("RUNNING"),
        "another state machine's end": sample("ABORTED", "arn:aws:states:us-east-2:123456789012:stateMachine:other"),
        "another source": sample("ABORTED", source="aws.batch"),
    }
    found += [f"the rule matches {what}" for what, event in strangers.items() if matches(pattern, event)]
    return found


def names_machine(expression: Any, machine: str, attribute: str = "") -> bool:
    """Whether a template expression refers to the state machine: !Ref NAME or
    ${NAME} in a !Sub (with attribute ".Name": ${NAME.Name} or !GetAtt NAME.Name)."""
    text = json.dumps(expression)
    if attribute:
        return f"${{{machine}{attribute}}}" in text or json.dumps({"Fn::GetAtt": [machine, attribute[1:]]}) in text
    return json.dumps({"Ref": machine}) in text or f"${{{machine}}}" in text


def swept_machines_problems(resources: dict[str, Any]) -> list[str]:
    """Each of the stack's own state machines takes the lock, so the sweep must
    see its ends (the rule), accept them (SWEPT_STATE_MACHINE_ARNS) and may
    confirm them (DescribeExecution on its executions)."""
    found = []
    machines = [name for name, resource in resources.items() if resource.get("Type") == "AWS::Serverless::StateMachine"]
    rule_arns = resources["ExecutionEndedRule"]["Properties"]["EventPattern"].get("detail", {}).get("stateMachineArn")
    function = resources["ReleaseExecutionLocksFunction"]["Properties"]
    swept = function["Environment"]["Variables"].get("SWEPT_STATE_MACHINE_ARNS")
    describe = [statement.get("Resource") for policy in function["Policies"] for statement in policy.get("Statement", [])
                if statement.get("Sid") == "ConfirmTheExecutionEnded"]
    for machine in machines:
        if not names_machine(rule_arns, machine):
            found.append(f"the rule does not match the ends of {machine}")
        if not names_machine(swept, machine):
            found.append(f"SWEPT_STATE_MACHINE_ARNS lacks {machine}")
        if not names_machine(describe, machine, ".Name"):
            found.append(f"the sweep may not DescribeExecution {machine}'s executions (ConfirmTheExecutionEnded)")
    return found


def problems(template: dict[str, Any]) -> list[str]:
    found = []
    resources = template["Resources"]
    found += pattern_problems(resources["ExecutionEndedRule"]["Properties"]["EventPattern"])
    found += swept_machines_problems(resources)
    mapping = resources["ReleaseExecutionLocksEventSourceMapping"]["Properties"]
    if "ReportBatchItemFailures" not in mapping.get("FunctionResponseTypes", []):
        found.append("the cleanup event source mapping does not report batch item failures")
    targets = resources["ExecutionEndedRule"]["Properties"]["Targets"]
    transformer = targets[0].get("InputTransformer")
    if transformer is None:
        found.append("the rule sends whole events (with execution input and output) to the queue")
    else:
        text = transformer["InputTemplate"]
        for name, path in transformer["InputPathsMap"].items():
            text = text.replace(f"<{name}>", str(path_value(SAMPLE_EVENT, path)))
        sent = json.loads(text)
        if re.search(r'"(input|output)"', json.dumps(sent)):
            found.append("the rule's InputTemplate carries the execution input or output")
        for key in ("source", "detail-type"):
            if sent.get(key) != SAMPLE_EVENT[key]:
                found.append(f"the transformed event's {key} is {sent.get(key)!r}")
        for key in ("executionArn", "status"):
            if sent.get("detail", {}).get(key) != SAMPLE_EVENT["detail"][key]:
                found.append(f"the transformed event's detail.{key} is not the event's")
    for name, calls in CALLS.items():
        missing_calls = calls - unconditional_actions(resources[name])
        if missing_calls and name != "ReleaseExecutionLocksFunction":
            found.append(f"{name} may not call {sorted(missing_calls)}")
    function = resources["ReleaseExecutionLocksFunction"]["Properties"]
    missing = ENV - set(function["Environment"]["Variables"])
    if missing:
        found.append(f"the sweep function lacks {sorted(missing)}")
    granted = set()
    for policy in function["Policies"]:
        for statement in policy.get("Statement", []):
            if "Fn::If" in statement:
                continue  # what every deployment needs must not depend on a condition
            actions = statement.get("Action", [])
            granted.update([actions] if isinstance(actions, str) else actions)
            if "dynamodb:Query" in actions and "index/owner-index" not in json.dumps(statement.get("Resource")):
                found.append("the sweep's Query is not granted on the owner index it reads")
    if ACTIONS - granted:
        found.append(f"the sweep function may not call {sorted(ACTIONS - granted)}")
    return found


def self_test(template: dict[str, Any]) -> int:
    def broken(change) -> dict[str, Any]:
        copied = copy.deepcopy(template)
        change(copied["Resources"])
        return copied

    def drop_machine(expression: Any, machine: str = "SkipIfRunningStateMachine") -> Any:
        # !Join ["", [Locked, !Sub ",${SkipIfRunningStateMachine}", ...]] without that !Sub.
        parts = expression["Fn::Join"][1]
        if {"Fn::Sub": f",${{{machine}}}"} not in parts:
            raise AssertionError(f"self-test: {machine} is not in {parts}; update the case")
        parts[:] = [part for part in parts if part != {"Fn::Sub": f",${{{machine}}}"}]
        return expression

    def drop_skip_if_running(expression: Any) -> Any:
        return drop_machine(expression)

    def drop_queued(expression: Any) -> Any:
        return drop_machine(expression, "QueuedWorkflowStateMachine")

    def describe_statement(r: dict[str, Any]) -> dict[str, Any]:
        return next(s for s in r["ReleaseExecutionLocksFunction"]["Properties"]["Policies"][0]["Statement"]
                    if s.get("Sid") == "ConfirmTheExecutionEnded")

    cases = {
        "skip-if-running missing from the rule": lambda r: drop_skip_if_running(
            r["ExecutionEndedRule"]["Properties"]["EventPattern"]["detail"]["stateMachineArn"]["Fn::Split"][1]),
        "skip-if-running missing from SWEPT_STATE_MACHINE_ARNS": lambda r: drop_skip_if_running(
            r["ReleaseExecutionLocksFunction"]["Properties"]["Environment"]["Variables"]["SWEPT_STATE_MACHINE_ARNS"]),
        "DescribeExecution without skip-if-running's executions": lambda r: describe_statement(r).update(
            Resource=[x for x in describe_statement(r)["Resource"] if "SkipIfRunningStateMachine" not in json.dumps(x)]),
        "the queued workflow missing from the rule": lambda r: drop_queued(
            r["ExecutionEndedRule"]["Properties"]["EventPattern"]["detail"]["stateMachineArn"]["Fn::Split"][1]),
        "the queued workflow missing from SWEPT_STATE_MACHINE_ARNS": lambda r: drop_queued(
            r["ReleaseExecutionLocksFunction"]["Properties"]["Environment"]["Variables"]["SWEPT_STATE_MACHINE_ARNS"]),
        "DescribeExecution without the queued workflow's executions": lambda r: describe_statement(r).update(
            Resource=[x for x in describe_statement(r)["Resource"] if "QueuedWorkflowStateMachine" not in json.dumps(x)]),
        "no per-record failures": lambda r: r["ReleaseExecutionLocksEventSourceMapping"]["Properties"].pop("FunctionResponseTypes"),
        "whole events to the queue": lambda r: r["ExecutionEndedRule"]["Properties"]["Targets"][0].pop("InputTransformer"),
        "input in the message": lambda r: r["ExecutionEndedRule"]["Properties"]["Targets"][0]["InputTransformer"].update(
            InputTemplate='{"source": "aws.states", "detail": {"input": "x"}}'),
        "no queue URL": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Environment"]["Variables"].pop("CLEANUP_QUEUE_URL"),
        "a status missing from the rule": lambda r: r["ExecutionEndedRule"]["Properties"]["EventPattern"]["detail"]["status"].remove("SUCCEEDED"),
        "RUNNING in the rule": lambda r: r["ExecutionEndedRule"]["Properties"]["EventPattern"]["detail"]["status"].append("RUNNING"),
        "any source": lambda r: r["ExecutionEndedRule"]["Properties"]["EventPattern"].pop("source"),
        "no Query on the index": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Policies"][0]["Statement"].pop(0),
        "Query on the table, not the index": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Policies"][0]["Statement"][0].update(
            Resource={"Fn::GetAtt": ["LockTable", "Arn"]}),
        "acquire without UpdateItem": lambda r: r["AcquireLockFunction"]["Properties"]["Policies"][0]["Statement"][0].update(
            Action="dynamodb:GetItem"),
        "no DescribeExecution": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Policies"][0]["Statement"].pop(
            next(i for i, s in enumerate(r["ReleaseExecutionLocksFunction"]["Properties"]["Policies"][0]["Statement"])
                 if s.get("Sid") == "ConfirmTheExecutionEnded")),
    }
    failures = 0
    for name, change in cases.items():
        found = problems(broken(change))
        print(f"{'ok  ' if found else 'FAIL'} sweep-wiring rejects {name}: {found[:1]}")
        failures += not found
    return 1 if failures else 0


def main() -> int:
    template = load(Path("template.yaml" if sys.argv[1] == "--self-test" else sys.argv[1]))
    if sys.argv[1] == "--self-test":
        return self_test(template)
    found = problems(template)
    for problem in found:
        print(f"template.yaml: {problem}")
    print(f"sweep wiring: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
