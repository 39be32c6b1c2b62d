"""The cleanup sweep's wiring in template.yaml, checked against what its code needs.

- The event source mapping reports failures per record (ReportBatchItemFailures),
  so one record that keeps failing does not hold up the rest of its batch.
- The rule's target sends only what the sweep reads: its InputTransformer,
  filled in from a documented ABORTED event, is an EventBridge envelope whose
  detail has executionArn and status, and no execution input or output.
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


def path_value(event: dict[str, Any], path: str) -> Any:
    value: Any = event
    for part in path.removeprefix("$.").split("."):
        value = value[part]
    return value


def problems(template: dict[str, Any]) -> list[str]:
    found = []
    resources = template["Resources"]
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
    if ACTIONS - granted:
        found.append(f"the sweep function may not call {sorted(ACTIONS - granted)}")
    return found


def self_test(template: dict[str, Any]) -> int:
    def broken(change) -> dict[str, Any]:
        copied = copy.deepcopy(template)
        change(copied["Resources"])
        return copied

    cases = {
        "no per-record failures": lambda r: r["ReleaseExecutionLocksEventSourceMapping"]["Properties"].pop("FunctionResponseTypes"),
        "whole events to the queue": lambda r: r["ExecutionEndedRule"]["Properties"]["Targets"][0].pop("InputTransformer"),
        "input in the message": lambda r: r["ExecutionEndedRule"]["Properties"]["Targets"][0]["InputTransformer"].update(
            InputTemplate='{"source": "aws.states", "detail": {"input": "x"}}'),
        "no queue URL": lambda r: r["ReleaseExecutionLocksFunction"]["Properties"]["Environment"]["Variables"].pop("CLEANUP_QUEUE_URL"),
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
