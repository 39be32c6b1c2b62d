"""`sfn-lock wrap` on a JSONata definition (issue 28), run on the deployed
default stack: the CLI wraps a definition of the user's own written in
JSONata, the output (JSONata throughout, the lock states of
statemachine/jsonata/) gets the stack's function versions for its
placeholders, as README's recipe says, and runs through the Step Functions
API. aws-local-stepfunctions, the e2e tier's interpreter, has no JSONata:
this is where a wrapped JSONata definition runs at all.

Two executions on one key take turns (the second polls until the first
released: its acquire failed LockUnavailable and was retried), and a
definition that ends in its own Fail state releases and fails with that
error, its data a JSONata lock name read from the execution input."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from pathlib import Path

import cli
from background import _role
from lockstate import Lock, history, poll, task_errors
from test_queued import ended

# The user's definition: JSONata, a lock per customer, a Wait for the time
# the input asks, then either the order's summary or the order's rejection.
USER_DEFINITION = {
    "QueryLanguage": "JSONata",
    "Comment": "A user's JSONata workflow, wrapped by tests/deployed/test_wrap_jsonata.py",
    "TimeoutSeconds": 120,
    "StartAt": "Work",
    "States": {
        "Work": {"Type": "Wait", "Seconds": "{% $states.input.waitSeconds %}", "Next": "Check"},
        "Check": {"Type": "Choice", "Default": "Summarize", "Choices": [
            {"Condition": "{% $states.input.reject = true %}", "Next": "Reject"}]},
        "Reject": {"Type": "Fail", "Error": "Order.Rejected", "Cause": "the order was rejected"},
        "Summarize": {"Type": "Pass", "End": True,
                      "Output": "{% {'customer': $states.input.customer, 'done': true} %}"},
    },
}


def _wrapped_machine(aws, outputs) -> str:
    with tempfile.TemporaryDirectory() as d:
        mine = Path(d) / "orders.asl.json"
        mine.write_text(json.dumps(USER_DEFINITION))
        wrapped = subprocess.run([str(cli.CLI), "wrap", "--lock-name-path", "$.customer",
                                  "--max-wait-seconds", "60", "--workload-max-run-seconds", "30",
                                  str(mine)], capture_output=True, text=True, check=True, timeout=60).stdout
    definition = json.loads(wrapped)
    assert definition["QueryLanguage"] == "JSONata", "the output keeps the definition's language"
    for key in ("AcquireLockFunctionArn", "ReleaseLockFunctionArn"):
        wrapped = wrapped.replace("${%s}" % key, outputs[f"{key[:-3]}VersionArn"])
    assert "${" not in wrapped, "wrap left a substitution the recipe does not name"
    return aws.client("stepfunctions").create_state_machine(
        name=f"orders-jsonata-{uuid.uuid4().hex[:6]}", roleArn=_role(aws.client("iam"), "orders-jsonata-role"),
        definition=wrapped)["stateMachineArn"]


def _start(sfn, machine, given) -> str:
    return sfn.start_execution(stateMachineArn=machine, name=f"orders-{uuid.uuid4().hex[:8]}",
                               input=json.dumps(given))["executionArn"]


def test_wrapped_jsonata_definition_takes_turns_and_releases_on_its_own_failure(aws, default_stack):
    outputs = default_stack["outputs"]
    sfn = aws.client("stepfunctions")
    machine = _wrapped_machine(aws, outputs)
    customer = f"customer-{uuid.uuid4().hex[:6]}"
    lock = Lock(aws, outputs["LockStoreUrl"], customer)
    first = _start(sfn, machine, {"customer": customer, "waitSeconds": 4})
    poll("the first execution holds its customer's lock", lambda: lock.holders() == [first], timeout=60)
    second = _start(sfn, machine, {"customer": customer, "waitSeconds": 0})

    def second_refused():
        assert lock.holders() == [first], "the first let go before the second asked: lengthen its wait"
        return "LockUnavailable" in task_errors(history(sfn, second))

    poll("the second execution is refused while the first holds", second_refused, timeout=60)
    for arn in (first, second):
        described = ended(sfn, arn)
        assert described["status"] == "SUCCEEDED", described
        assert json.loads(described["output"]) == {"customer": customer, "done": True}
    assert lock.holders() == []

    rejected = _start(sfn, machine, {"customer": customer, "waitSeconds": 0, "reject": True})
    described = ended(sfn, rejected)
    assert described["status"] == "FAILED", described
    assert described.get("error") == "Order.Rejected", described
    assert lock.holders() == [], "the failure released the lock"
