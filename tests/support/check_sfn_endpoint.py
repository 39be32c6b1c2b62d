"""Checks the local Step Functions endpoint (sfn_endpoint.py) with a real AWS client.

boto3 parses errors as the Rust SDK does (the code after the '#' of "__type"), so
each case below proves that a client gets the typed exception a real Step
Functions sends: tokens that never existed, ended, timed out, stopped; output that
is not JSON; injected faults; and that other calls reach moto unchanged.

Usage: python check_sfn_endpoint.py ENDPOINT_URL (exits non-zero on the first failure)
"""

import json
import sys
import time
import urllib.request
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

URL = sys.argv[1]
# One attempt, so that an injected fault is seen as it is, not retried away; no
# client-side validation, so that an empty token reaches the server.
sfn = boto3.client(
    "stepfunctions",
    endpoint_url=URL,
    config=Config(retries={"total_max_attempts": 1}, parameter_validation=False),
)


def local(route: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{URL}/_local/{route}", data=data)) as response:
        return json.load(response)


def mint(timeout: float = 60) -> str:
    return local("tokens", {"execution": "arn:check", "state": "Acquire Lock", "timeoutSeconds": timeout})["taskToken"]


def outcome(token: str, wait: float = 0) -> dict:
    return local(f"tokens/{quote(token, safe='')}/outcome?waitSeconds={wait}")


def refused(expected: str, call, **kwargs) -> None:
    try:
        call(**kwargs)
    except ClientError as error:
        code, status = error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]
        assert (code, status) == (expected, 400), f"expected {expected}/400, got {code}/{status}"
        modeled = getattr(sfn.exceptions, expected)
        assert isinstance(error, modeled), f"{type(error)} is not the modeled {expected}"
        return
    raise AssertionError(f"expected {expected}, the call succeeded")


def main() -> None:
    token = mint()
    assert 700 <= len(token) <= 1000, len(token)
    assert sfn.send_task_heartbeat(taskToken=token)["ResponseMetadata"]["HTTPStatusCode"] == 200
    refused("InvalidOutput", sfn.send_task_success, taskToken=token, output="{not json")
    refused("InvalidOutput", sfn.send_task_success, taskToken=token, output=json.dumps("x" * 262144))
    assert outcome(token) == {"status": "OPEN"}
    sfn.send_task_success(taskToken=token, output='{"outcome": "granted"}')
    assert outcome(token) == {"status": "SUCCEEDED", "output": '{"outcome": "granted"}'}
    # A token is used once: every later call finds it closed.
    refused("TaskTimedOut", sfn.send_task_success, taskToken=token, output="{}")
    refused("TaskTimedOut", sfn.send_task_failure, taskToken=token, error="E")
    refused("TaskTimedOut", sfn.send_task_heartbeat, taskToken=token)

    refused("TaskDoesNotExist", sfn.send_task_success, taskToken=mint()[::-1], output="{}")
    refused("InvalidToken", sfn.send_task_success, taskToken="", output="{}")
    refused("InvalidToken", sfn.send_task_success, taskToken="A" * 2049, output="{}")

    failed = mint()
    sfn.send_task_failure(taskToken=failed, error="LockStoreUnavailable", cause="{}")
    assert outcome(failed) == {"status": "FAILED", "error": "LockStoreUnavailable", "cause": "{}"}

    # The Task's TimeoutSeconds: the token times out by itself; a long poll sees it end.
    timed = mint(timeout=0.2)
    assert outcome(timed, wait=10)["status"] == "TIMED_OUT"
    refused("TaskTimedOut", sfn.send_task_success, taskToken=timed, output="{}")

    stopped = mint()
    assert local(f"tokens/{quote(stopped, safe='')}/close", {"reason": "stopped"}) == {"status": "STOPPED"}
    refused("TaskTimedOut", sfn.send_task_success, taskToken=stopped, output="{}")

    # Faults: neither a 500 nor a dropped connection completes the token; a lost answer does.
    faulty = mint()
    local("faults", {"action": "SendTaskSuccess", "count": 1, "status": 500})
    local("faults", {"action": "SendTaskSuccess", "count": 1, "status": "drop"})
    local("faults", {"action": "SendTaskSuccess", "count": 1, "status": "lose_answer"})
    try:
        sfn.send_task_success(taskToken=faulty, output="{}")
        raise AssertionError("the injected 500 did not fail the call")
    except ClientError as error:
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 500, error.response
    for _ in range(2):
        try:
            sfn.send_task_success(taskToken=faulty, output="{}")
            raise AssertionError("the injected drop did not fail the call")
        except (ConnectionClosedError, EndpointConnectionError):
            pass
    assert outcome(faulty)["status"] == "SUCCEEDED", "lose_answer completes the token"
    refused("TaskTimedOut", sfn.send_task_success, taskToken=faulty, output="{}")
    results = [call["result"] for call in local("calls") if call["taskToken"] == faulty]
    assert results == ["fault:500", "fault:drop", "fault:lose_answer (ok)", "TaskTimedOut"], results

    # A fault for one execution's tokens leaves another's alone.
    mine, other = mint(), local("tokens", {"execution": "arn:other", "state": "S"})["taskToken"]
    local("faults", {"action": "SendTaskSuccess", "count": 1, "status": 500, "execution": "arn:check"})
    sfn.send_task_success(taskToken=other, output="{}")
    try:
        sfn.send_task_success(taskToken=mine, output="{}")
        raise AssertionError("the fault for arn:check did not fail its call")
    except ClientError as error:
        assert error.response["Error"]["Code"] == "InternalFailure", error.response

    # Everything else is moto's.
    name = f"check-endpoint-{int(time.time() * 1000)}"
    arn = sfn.create_state_machine(
        name=name,
        roleArn="arn:aws:iam::123456789012:role/check",
        definition='{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}',
    )["stateMachineArn"]
    assert sfn.describe_state_machine(stateMachineArn=arn)["name"] == name
    try:
        sfn.describe_execution(executionArn=arn.replace(":stateMachine:", ":execution:") + ":none")
        raise AssertionError("DescribeExecution of no execution succeeded")
    except sfn.exceptions.ExecutionDoesNotExist:
        pass
    print("sfn endpoint: all checks passed")


if __name__ == "__main__":
    main()
