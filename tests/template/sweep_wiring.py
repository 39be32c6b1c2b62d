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
- The function gets the settings the code reads (ENV, each one the sweep's code reads:
  environment.release-execution-locks of contract/code-facts.json, which a Rust
  test keeps true) and the calls it makes are allowed: DescribeExecution (every end
  is confirmed), SendMessage on the cleanup queue (early events go back).

All of this holds for every lock store (LockStore): each value LockStore allows
is checked on the template as that value deploys it (cfn_template.specialize), with
that store's calls (STORE_CALLS); the queued workflow is deployed, and swept, with
the DynamoDB store only. With SampleStateMachines "true" (the default, SAMPLES_ON).

Usage: sweep_wiring.py template.yaml | --self-test
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import code_facts
from cfn_template import TemplateError, load, specialize

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
ENV = {"LOCK_STORE_URL", "SWEPT_STATE_MACHINE_ARNS", "SWEEP_GRACE_SECONDS", "CLEANUP_QUEUE_URL",
       "ATTACHED_STATE_MACHINE_ARN", "TARGET_STATE_MACHINE_ARN"}
# What the sweep calls beside its store: describe_execution and send_message (and
# stop_execution for the attach child, under HasTargetStateMachine).
SWEEP_ACTIONS = {"states:DescribeExecution", "sqs:SendMessage"}
# What each lock function's store calls at least, per LockStore (function_permissions.py
# holds the exact sets, from the operations each function is recorded calling):
# UpdateItem, and the sweep's Query of the owner index; GetObject and PutObject, and
# the sweep's ListObjectsV2; GetParameter and PutParameter, and GetParametersByPath.
STORE_CALLS = {
    "dynamodb": {"AcquireLockFunction": {"dynamodb:UpdateItem"}, "ReleaseLockFunction": {"dynamodb:UpdateItem"},
                 "ReleaseExecutionLocksFunction": {"dynamodb:Query", "dynamodb:UpdateItem"}},
    "s3": {"AcquireLockFunction": {"s3:GetObject", "s3:PutObject"},
           "ReleaseLockFunction": {"s3:GetObject", "s3:PutObject"},
           "ReleaseExecutionLocksFunction": {"s3:ListBucket", "s3:GetObject", "s3:PutObject"}},
    "ssm": {"AcquireLockFunction": {"ssm:GetParameter", "ssm:PutParameter"},
            "ReleaseLockFunction": {"ssm:GetParameter", "ssm:PutParameter"},
            "ReleaseExecutionLocksFunction": {"ssm:GetParametersByPath", "ssm:GetParameter", "ssm:PutParameter"}},
}
STORE_PARAMETER = "LockStore"
# The stack's own state machines are the samples (SampleStateMachines, default
# "true") and the attach wrapper; without the samples, tests/deployed/
# test_no_samples.py deploys it and watches the sweep.
SAMPLES_ON = {"SampleStateMachines": "true"}


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
    """Every problem, for each LockStore value, as that value deploys the template."""
    stores = [str(v) for v in ((template.get("Parameters", {}) or {}).get(STORE_PARAMETER, {}) or {})
              .get("AllowedValues", [])]
    if not stores:
        return [f"no {STORE_PARAMETER} parameter with AllowedValues"]
    found = []
    for store in stores:
        if store not in STORE_CALLS:
            found.append(f"{STORE_PARAMETER} allows {store!r}, whose calls this check does not know")
            continue
        try:
            deployed = specialize(template, {STORE_PARAMETER: store, **SAMPLES_ON})
        except TemplateError as error:
            found.append(f"[{STORE_PARAMETER}={store}] {error}")
            continue
        found += [f"[{STORE_PARAMETER}={store}] {problem}" for problem in store_problems(deployed, store)]
    return found


def store_problems(template: dict[str, Any], store: str) -> list[str]:
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
    calls = STORE_CALLS[store]
    for name in ("AcquireLockFunction", "ReleaseLockFunction"):
        missing_calls = calls[name] - unconditional_actions(resources[name])
        if missing_calls:
            found.append(f"{name} may not call {sorted(missing_calls)}")
    function = resources["ReleaseExecutionLocksFunction"]["Properties"]
    missing = ENV - set(function["Environment"]["Variables"])
    if missing:
        found.append(f"the sweep function lacks {sorted(missing)}")
    unread = ENV - set(code_facts.get(code_facts.load(), "environment", "release-execution-locks"))
    if unread:
        found.append(f"the sweep's code no longer reads {sorted(unread)} ({code_facts.FACTS})")
    granted = set()
    for policy in function["Policies"]:
        for statement in policy.get("Statement", []):
            if "Fn::If" in statement:
                continue  # what every deployment needs must not depend on a condition
            actions = statement.get("Action", [])
            granted.update([actions] if isinstance(actions, str) else actions)
            if "dynamodb:Query" in actions and "index/owner-index" not in json.dumps(statement.get("Resource")):
                found.append("the sweep's Query is not granted on the owner index it reads")
    actions = calls["ReleaseExecutionLocksFunction"] | SWEEP_ACTIONS
    if actions - granted:
        found.append(f"the sweep function may not call {sorted(actions - granted)}")
    return found


def self_test(template: dict[str, Any]) -> int:
    def broken(change) -> dict[str, Any]:
        copied = copy.deepcopy(template)
        change(copied["Resources"])
        return copied

    def drop_machine(expression: Any, machine: str = "SkipIfRunningStateMachine") -> Any:
        # !Join ["", [Locked, !Sub ",${SkipIfRunningStateMachine}", ...]] without that !Sub
        # (or the !If that holds it).
        parts = expression["Fn::Join"][1]
        sub = {"Fn::Sub": f",${{{machine}}}"}
        kept = [part for part in parts if part != sub and not (isinstance(part, dict) and sub in part.get("Fn::If", []))]
        if len(kept) != len(parts) - 1:
            raise AssertionError(f"self-test: {machine} is not in {parts} once; update the case")
        parts[:] = kept
        return expression

    def drop_skip_if_running(expression: Any) -> Any:
        return drop_machine(expression)

    def drop_queued(expression: Any) -> Any:
        return drop_machine(expression, "QueuedWorkflowStateMachine")

    def document(r: dict[str, Any], function: str, condition: str | None) -> dict[str, Any]:
        """The function's policy document under !If [condition, ...], or its one unconditional one."""
        for policy in r[function]["Properties"]["Policies"]:
            branch = policy.get("Fn::If")
            if branch and branch[0] == condition:
                return branch[1]
            if not branch and condition is None:
                return policy
        raise AssertionError(f"self-test: no policy of {function} under {condition}; update the case")

    def statements(r: dict[str, Any], function: str = "ReleaseExecutionLocksFunction",
                   condition: str | None = "UseDynamoDbStore") -> list[Any]:
        return document(r, function, condition)["Statement"]

    def describe_statement(r: dict[str, Any]) -> dict[str, Any]:
        # Under !If [HasOwnStateMachines, ...] (SampleStateMachines), which SAMPLES_ON decides.
        unwrapped = [s.get("Fn::If", [None, s])[1] for s in statements(r, condition=None)]
        return next(s for s in unwrapped if s.get("Sid") == "ConfirmTheExecutionEnded")

    def drop_sid(function: str, condition: str, sid: str) -> Any:
        def change(r: dict[str, Any]) -> None:
            found = statements(r, function, condition)
            if sum(s.get("Sid") == sid for s in found) != 1:
                raise AssertionError(f"self-test: no one {sid} in {function} under {condition}; update the case")
            found[:] = [s for s in found if s.get("Sid") != sid]
        return change

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
        "no Query on the index": drop_sid("ReleaseExecutionLocksFunction", "UseDynamoDbStore", "FindLocksByOwner"),
        "Query on the table, not the index": lambda r: next(
            s for s in statements(r) if s.get("Sid") == "FindLocksByOwner").update(
            Resource={"Fn::GetAtt": ["LockTable", "Arn"]}),
        "acquire without UpdateItem": lambda r: statements(r, "AcquireLockFunction")[0].update(
            Action="dynamodb:GetItem"),
        "no DescribeExecution": lambda r: statements(r, condition=None).__setitem__(
            slice(None), [s for s in statements(r, condition=None)
                          if describe_statement(r) not in (s, s.get("Fn::If", [None, None])[1])]),
        "the S3 sweep without ListBucket": drop_sid("ReleaseExecutionLocksFunction", "UseS3Store", "ListTheLockBucket"),
        "the S3 release without its objects": drop_sid("ReleaseLockFunction", "UseS3Store", "ReleaseLockObjects"),
        "the SSM acquire without its parameters": drop_sid("AcquireLockFunction", "UseSsmStore",
                                                           "ReadAndWriteLockParameters"),
        "the queued workflow deployed with every store, swept with DynamoDB only": lambda r: [
            r[name].pop("Condition") for name in ("QueuedWorkflowStateMachine", "QueuedWorkflowLogGroup")],
        "no LOCK_STORE_URL": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Environment"]["Variables"].pop(
            "LOCK_STORE_URL"),
    }
    failures = 0
    shipped = problems(template)
    if shipped:
        print(f"FAIL the shipped template: {shipped}")
        failures += 1
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
