"""Every deployed variant: every resource created, and every output the
README tells a user to use names a live resource of that stack, read back
through its own service's API. An output with no check here fails: a new
output gets one. Alarms on (defaults), on with the user's topic (the attach
variant's AlarmTopicArn), off (Alarms=false, Dashboard=false)."""

from __future__ import annotations

import pytest

VARIANTS = ["default_stack", "s3_stack", "attach_stack", "swept", "scheduled"]
LOCK_FUNCTIONS = ("AcquireLockFunctionArn", "ReleaseLockFunctionArn", "ReleaseExecutionLocksFunctionArn")
# What the template's conditions deploy, per store (LockStore).
STORE_OUTPUTS = {
    "dynamodb": {"LockTableName", "LockTableArn", "QueuedWorkflowStateMachineArn"},
    "s3": {"LockBucketName"},
    "ssm": set(),
}


@pytest.fixture(params=VARIANTS)
def stack(request):
    deployed = request.getfixturevalue(request.param)
    return deployed.get("stack", deployed)


def _function(aws, arn):
    config = aws.client("lambda").get_function(FunctionName=arn)["Configuration"]
    assert config.get("State", "Active") == "Active", (arn, config.get("State"))
    return config


def _environment(aws, outputs, name):
    """A variable as every lock function of the stack has it."""
    values = {_function(aws, outputs[key])["Environment"]["Variables"].get(name) for key in LOCK_FUNCTIONS}
    assert len(values) == 1, (name, values)
    return values.pop()


def check_store(aws, outputs, url):
    # The store the functions use, and it exists.
    assert _environment(aws, outputs, "LOCK_STORE_URL") == url
    scheme, _, rest = url.partition("://")
    if scheme == "dynamodb":
        assert aws.client("dynamodb").describe_table(TableName=rest)["Table"]["TableStatus"] == "ACTIVE"
    elif scheme == "s3":
        aws.client("s3").head_bucket(Bucket=rest.split("/")[0])
    else:
        # SSM: parameters appear with the first lock; the path is the stack's.
        assert scheme == "ssm" and rest.startswith("/sfn-lock/"), url


def check_table(aws, outputs, name):
    table = aws.client("dynamodb").describe_table(TableName=name)["Table"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["lockName"]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["owner-index"]
    assert outputs["LockTableArn"] == table["TableArn"]
    assert outputs["LockStoreUrl"] == f"dynamodb://{name}"


def check_bucket(aws, outputs, name):
    aws.client("s3").head_bucket(Bucket=name)
    assert outputs["LockStoreUrl"] == f"s3://{name}/locks/"


def check_version(aws, outputs, arn):
    """A published version, the one the stack's own state machines call (a
    state machine of the user's calls it too: README, "IAM")."""
    assert _function(aws, arn)["Version"] not in ("", "$LATEST"), arn
    definition = aws.client("stepfunctions").describe_state_machine(
        stateMachineArn=outputs["LockedWorkflowStateMachineArn"])["definition"]
    assert arn in definition, f"the locked workflow does not call {arn}"


def check_state_machine(aws, outputs, arn):
    assert aws.client("stepfunctions").describe_state_machine(stateMachineArn=arn)["status"] == "ACTIVE"


def check_queues(aws, outputs, _url):
    """The cleanup queue dead-letters into the dead-letter queue output."""
    sqs = aws.client("sqs")
    dlq = sqs.get_queue_attributes(QueueUrl=outputs["CleanupDeadLetterQueueUrl"],
                                   AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    attrs = sqs.get_queue_attributes(QueueUrl=outputs["CleanupQueueUrl"], AttributeNames=["All"])["Attributes"]
    assert dlq in attrs["RedrivePolicy"], attrs


def check_namespace(aws, outputs, namespace):
    # EMF lines become no metrics in ministack: the functions' setting only.
    assert _environment(aws, outputs, "METRICS_NAMESPACE") == namespace


def check_dashboard(aws, outputs, name):
    assert aws.client("cloudwatch").get_dashboard(DashboardName=name)["DashboardBody"]


CHECKS = {
    "LockStoreUrl": check_store,
    "LockTableName": check_table,
    "LockTableArn": lambda aws, outputs, arn: check_table(aws, outputs, outputs["LockTableName"]),
    "LockBucketName": check_bucket,
    "AcquireLockFunctionArn": lambda aws, outputs, arn: _function(aws, arn),
    "ReleaseLockFunctionArn": lambda aws, outputs, arn: _function(aws, arn),
    "ReleaseExecutionLocksFunctionArn": lambda aws, outputs, arn: _function(aws, arn),
    "WorkloadFunctionArn": lambda aws, outputs, arn: _function(aws, arn),
    "AcquireLockFunctionVersionArn": check_version,
    "ReleaseLockFunctionVersionArn": check_version,
    "LockedWorkflowStateMachineArn": check_state_machine,
    "QueuedWorkflowStateMachineArn": check_state_machine,
    "SkipIfRunningStateMachineArn": check_state_machine,
    "AttachedWorkflowStateMachineArn": check_state_machine,
    "CleanupQueueUrl": check_queues,
    "CleanupDeadLetterQueueUrl": check_queues,
    "MetricsNamespace": check_namespace,
    "DashboardName": check_dashboard,
}


def test_every_resource_created(aws, stack):
    resources = aws.client("cloudformation").describe_stack_resources(StackName=stack["name"])["StackResources"]
    assert {r["ResourceStatus"] for r in resources} == {"CREATE_COMPLETE"}
    types = {r["ResourceType"] for r in resources}
    # What the SAM transform made of the template: versions and aliases, the
    # rule, queues and mapping of the sweep chain, the state machines.
    for expected in ("AWS::Lambda::Function", "AWS::Lambda::Version", "AWS::Lambda::Alias",
                     "AWS::Lambda::EventSourceMapping", "AWS::Events::Rule", "AWS::SQS::Queue",
                     "AWS::SQS::QueuePolicy", "AWS::StepFunctions::StateMachine", "AWS::IAM::Role"):
        assert expected in types, expected
    assert not any(t.startswith("AWS::Serverless::") for t in types)


def test_every_output_names_a_live_resource(aws, stack):
    outputs = stack["outputs"]
    store = stack["parameters"].get("LockStore", "dynamodb")
    expected = {"LockStoreUrl", "AcquireLockFunctionArn", "ReleaseLockFunctionArn",
                "ReleaseExecutionLocksFunctionArn", "WorkloadFunctionArn", "AcquireLockFunctionVersionArn",
                "ReleaseLockFunctionVersionArn", "LockedWorkflowStateMachineArn", "SkipIfRunningStateMachineArn",
                "CleanupQueueUrl", "CleanupDeadLetterQueueUrl", "MetricsNamespace"} | STORE_OUTPUTS[store]
    if "TargetStateMachineArn" in stack["parameters"]:
        expected.add("AttachedWorkflowStateMachineArn")
    if stack["parameters"].get("Dashboard", "true") == "true":
        expected.add("DashboardName")
    assert set(outputs) == expected
    for key, value in outputs.items():
        assert key in CHECKS, f"output {key} has no check in test_outputs.py: add one"
        CHECKS[key](aws, outputs, value)


def _alarms(aws, stack):
    resources = aws.client("cloudformation").describe_stack_resources(StackName=stack["name"])["StackResources"]
    names = [r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::CloudWatch::Alarm"]
    found = aws.client("cloudwatch").describe_alarms(AlarmNames=names)["MetricAlarms"] if names else []
    assert sorted(a["AlarmName"] for a in found) == sorted(names)
    return found


def test_alarms_on_off_and_to_the_users_topic(aws, default_stack, attach_stack, scheduled):
    default = _alarms(aws, default_stack)
    assert default and all(a["AlarmActions"] == [] for a in default)
    topic = attach_stack["parameters"]["AlarmTopicArn"]
    to_topic = _alarms(aws, attach_stack)
    assert to_topic and all(a["AlarmActions"] == [topic] for a in to_topic)
    assert _alarms(aws, scheduled["stack"]) == []  # Alarms=false
