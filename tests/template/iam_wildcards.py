#!/usr/bin/env python3
"""Fail on any wildcard in the IAM policies that template.yaml gives its
functions and state machines.

It checks the template after the SAM transform (done offline by cfn-lint's
copy of the SAM translator), so it sees what CloudFormation will create: the
statements written under `Policies`, what SAM policy templates and event
sources expand to (e.g. LambdaInvokePolicy grants `function:NAME*`, SAM's SQS
event attaches a managed policy that reads every queue), and any AWS::IAM::*
resource written by hand.

In an Allow statement it rejects:
- an Action with `*` or `?` (`*`, `dynamodb:*`, `dynamodb:Get*`), NotAction, NotResource;
- a Resource that is or contains `*`/`?`, including through a !GetAtt that
  returns a wildcard ARN (a log group's Arn ends in `:*`) or a !Ref to a
  parameter whose constraints would accept `*`;
- any managed policy but AWSLambdaBasicExecutionRole.

Resource "*" is allowed only in the statements STAR_STATEMENTS lists (by role and
Sid), for the actions listed with each, and only where parliament
(tests/requirements-lint.txt), from its database of the Service Authorization
Reference, finds nothing: every action in the statement has no resource-level
permission (RESOURCE_STAR otherwise). Both hold for the CloudWatch Logs
log-delivery actions of each state machine's DeliverExecutionLogs and for
states:SendTaskSuccess, with which the lock functions admit a queued waiter
(AdmitQueuedWaiters, HandOffToQueuedWaiters). Parliament alone is not enough: it
would let any action without resource-level permissions (cloudwatch:PutMetricData,
sqs:ListQueues) take "*" in any statement. Parliament also judges every Allow
statement's actions (UNKNOWN_ACTION, UNKNOWN_PREFIX: a misspelt action is refused).

What parliament cannot see, and stays here: it reads concrete policy JSON, not
CloudFormation, so this file resolves each Resource through the intrinsics (a
!GetAtt of a log group's Arn ends in ':*', a !Ref'd parameter whose
AllowedPattern would accept '*', each branch of a !If) after the SAM transform;
and the wildcard ARNs below are this project's own choices, each allowed for
named actions on this template's own resources only:
- `arn:...:states:REGION:ACCOUNT:execution:NAME:*` for states:DescribeExecution
  and states:StopExecution: what startExecution.sync needs on the executions it
  starts, whose names are chosen at run time; NAME must not be a wildcard.
- `arn:...:s3:::<bucket>/<prefix>/*` for s3:GetObject, s3:PutObject and
  s3:DeleteObject, where <bucket> is a bucket of this template (!Ref, never a
  parameter) and <prefix> a fixed path: the S3 lock store (LockStore s3) names
  its objects at run time (locks/<encoded lock name>, locks/.owners/<owner
  hash>/<encoded lock name>); the bucket holds nothing else.
- `arn:...:ssm:REGION:ACCOUNT:parameter/<path>/<stack name>/*` for
  ssm:GetParameter, ssm:GetParameters, ssm:GetParametersByPath, ssm:PutParameter
  and ssm:DeleteParameters, <path> a
  fixed path and <stack name> ${AWS::StackName}: the SSM lock store (LockStore
  ssm) names its parameters at run time, under the stack's own path
  (/sfn-lock/<stack>/<encoded lock name>/<generation>, .../.owners/...).
- `<function ARN>:*` for lambda:InvokeFunction only, where the function is one
  of this template's: every published version of it. The state machines call a
  lock function's version (AutoPublishAlias), and an execution started before a
  code update keeps calling the version it started with, while the role has
  already been updated: it must be allowed every version, not just the newest.
- AWSLambdaBasicExecutionRole, which SAM attaches to every function role it
  creates (CloudWatch Logs writes only).

Usage: iam_wildcards.py [TEMPLATE]   (default: template.yaml)
       iam_wildcards.py --self-test  (proves the check fails on bad policies, and on
                                      copies of template.yaml with a '*' grant planted)
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load, transform  # noqa: E402
from parliament import analyze_policy_string  # noqa: E402

# Resource "*": allowed in these statements only, each of the role named (the IAM
# role, after the SAM transform, of the function or state machine <Name>: <Name>Role)
# with that Sid, and only for the actions listed with it. Parliament must also find
# that every one of them has no resource-level permission (no resource type in the
# Service Authorization Reference, parliament's database): the list says where '*'
# is wanted, parliament that AWS offers nothing narrower. An action parliament would
# let take '*' (cloudwatch:PutMetricData, sqs:ListQueues, ...) is refused anywhere
# else; a new one needs a line here, with AWS's reason.
#
# The task-token action with which the lock functions admit a waiter of the queued
# workflow (its acquire Task is a Lambda callback, invoke.waitForTaskToken): the
# Service Authorization Reference ("Actions, resources, and condition keys for AWS
# Step Functions") lists no resource type and no condition key for
# states:SendTaskSuccess, so '*' is the only Resource it accepts; the task token in
# the request names the one task it completes. Only SendTaskSuccess: the functions
# never call SendTaskFailure or SendTaskHeartbeat (contract/code-facts.json), so
# they are not granted, though they too have no resource type.
TASK_TOKEN_ACTIONS = frozenset({"states:SendTaskSuccess"})
# What a state machine's role needs to deliver its execution logs to CloudWatch Logs
# (Step Functions developer guide, "IAM policies for logging to CloudWatch Logs",
# which grants them on "*"): log delivery is configured through these CloudWatch
# Logs vended-log APIs, for which the Service Authorization Reference ("Actions,
# resources, and condition keys for Amazon CloudWatch Logs") lists no resource
# type. Only the state machines log this way; the functions write through
# AWSLambdaBasicExecutionRole.
LOG_DELIVERY_ACTIONS = frozenset({"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
                                  "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
                                  "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"})
STATE_MACHINES_LOGGING = ("LockedWorkflowStateMachine", "QueuedWorkflowStateMachine", "SkipIfRunningStateMachine",
                          "AttachedWorkflowStateMachine")
STAR_STATEMENTS: dict[tuple[str, str], frozenset[str]] = {
    # acquire-lock admits the caller itself, a queued waiter, when a permit is free.
    ("AcquireLockFunctionRole", "AdmitQueuedWaiters"): TASK_TOKEN_ACTIONS,
    # release-lock and the sweep hand a freed permit to the next queued waiter.
    ("ReleaseLockFunctionRole", "HandOffToQueuedWaiters"): TASK_TOKEN_ACTIONS,
    ("ReleaseExecutionLocksFunctionRole", "HandOffToQueuedWaiters"): TASK_TOKEN_ACTIONS,
    **{(f"{machine}Role", "DeliverExecutionLogs"): LOG_DELIVERY_ACTIONS for machine in STATE_MACHINES_LOGGING},
}
EXECUTION_ACTIONS = frozenset({"states:DescribeExecution", "states:StopExecution"})
EXECUTION_ARN = re.compile(r"^arn:[^:*?]+:states:[^:*?]+:[^:*?]+:execution:[^:*?]+:\*$")
# The lock stores' run-time names: objects under a fixed prefix of a bucket of this
# template, parameters under a fixed path that ends in the stack's name.
LOCK_OBJECT_ACTIONS = frozenset({"s3:GetObject", "s3:PutObject", "s3:DeleteObject"})
LOCK_OBJECT_ARN = re.compile(r"^arn:[^:*?]+:s3:::<(?P<bucket>[A-Za-z0-9]+)>/[^*?]+/\*$")
LOCK_PARAMETER_ACTIONS = frozenset({"ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath",
                                    "ssm:PutParameter", "ssm:DeleteParameters"})
LOCK_PARAMETER_ARN = re.compile(r"^arn:[^:*?]+:ssm:[^:*?]+:[^:*?]+:parameter/(?:[^*?:]+/)?<StackName>/\*$")
FUNCTION_VERSIONS_ARN = re.compile(r"^<(?P<function>[A-Za-z0-9]+)\.Arn>:\*$")
FUNCTION_TYPES = frozenset({"AWS::Serverless::Function", "AWS::Lambda::Function"})
ALLOWED_MANAGED_POLICY = re.compile(r"^arn:[^:]+:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole$")

# Values a parameter used in a Resource must refuse.
WILDCARD_PROBES = (
    "*",
    "arn:aws:lambda:us-east-1:123456789012:function:*",
    "arn:aws:lambda:us-east-1:123456789012:function:sfn*",
    "arn:aws:states:us-east-1:123456789012:stateMachine:*",
    "arn:aws:dynamodb:us-east-1:123456789012:table/*",
)
WILDCARD = re.compile(r"[*?]")
IAM_TYPES = {"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::User", "AWS::IAM::Group"}


class Unresolvable(Exception):
    pass


def parliament_findings(actions: list[str], resource: str = "*") -> list[tuple[str, Any]]:
    """Parliament's findings on one Allow statement of `actions` on `resource`."""
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resource}]}
    return [(finding.issue, finding.detail) for finding in analyze_policy_string(json.dumps(policy)).findings]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


class Checker:
    def __init__(self, template: dict[str, Any],
                 star_statements: dict[tuple[str, str], frozenset[str]] | None = None):
        self.template = template
        self.star_statements = STAR_STATEMENTS if star_statements is None else star_statements
        self.parameters = template.get("Parameters", {}) or {}
        self.resources = template.get("Resources", {}) or {}
        self.problems: list[str] = []
        self.allowed: list[str] = []

    # -- resolving a Resource value into the strings it can become ---------------
    def parameter_marker(self, name: str, where: str) -> str:
        spec = self.parameters[name]
        allowed = spec.get("AllowedValues")
        pattern = spec.get("AllowedPattern")
        if allowed is not None:
            bad = [v for v in allowed if WILDCARD.search(str(v))]
            if bad:
                self.problems.append(f"{where}: parameter {name} allows the wildcard value(s) {bad}")
        elif pattern is None:
            self.problems.append(
                f"{where}: parameter {name} is used in a Resource without an AllowedPattern or "
                "AllowedValues, so it could be deployed as '*'"
            )
        else:
            accepted = [p for p in WILDCARD_PROBES if re.fullmatch(pattern, p)]
            if accepted:
                self.problems.append(f"{where}: parameter {name}'s AllowedPattern accepts {accepted[0]!r}")
        return f"<{name}>"

    def resolve(self, value: Any, where: str, sub_vars: dict[str, Any] | None = None) -> list[str]:
        if isinstance(value, (str, int, float)):
            return [str(value)]
        fn = intrinsic(value)
        if fn is None:
            raise Unresolvable(f"{value!r}")
        key, arg = fn
        if key == "Ref":
            if arg.startswith("AWS::"):
                return [f"<{arg[5:]}>"]
            if arg in self.parameters:
                return [self.parameter_marker(arg, where)]
            return [f"<{arg}>"]
        if key == "Fn::GetAtt":
            name, attribute = (arg.split(".", 1) if isinstance(arg, str) else arg)
            return [self.getatt(name, attribute)]
        if key == "Fn::If":
            return self.resolve(arg[1], where, sub_vars) + self.resolve(arg[2], where, sub_vars)
        if key == "Fn::Join":
            delimiter, parts = arg
            choices = [self.resolve(part, where, sub_vars) for part in as_list(parts)]
            return [delimiter.join(combo) for combo in itertools.product(*choices)]
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            return self.substitute(text, variables, where)
        if key == "Fn::Split" and (parameter := self.execution_arns_of(arg)) is not None:
            return [f"arn:<partition>:states:<region>:<account>:execution:{self.parameter_marker(parameter, where)}:*"]
        if key in ("Fn::Select", "Fn::Split", "Fn::FindInMap", "Fn::ImportValue", "Fn::GetAZs"):
            # Parts of something else: every string it could select from must be clean.
            for inner in self.walk_leaves(arg, where):
                if WILDCARD.search(inner):
                    return [inner]
            return [f"<{key[4:]}>"]
        raise Unresolvable(f"{key} in {where}")

    @staticmethod
    def execution_arns_of(split_arg: Any) -> str | None:
        """The list parameter P if `split_arg` is exactly the template's rewrite of
        P's state machine ARNs into their executions' ARNs (execution:NAME:*):
        Split [",", Sub ["${Arns}:*", {Arns: Join [":*,", Split [",", Join [":execution:",
        Split [":stateMachine:", Join [",", Ref P]]]]]}]]."""
        try:
            delimiter, sub = split_arg
            text, variables = sub["Fn::Sub"]
            join_star = variables["Arns"]["Fn::Join"]
            split_comma = join_star[1]["Fn::Split"]
            join_exec = split_comma[1]["Fn::Join"]
            split_sm = join_exec[1]["Fn::Split"]
            join_list = split_sm[1]["Fn::Join"]
            shape = (delimiter, text, join_star[0], split_comma[0], join_exec[0], split_sm[0], join_list[0])
            if shape == (",", "${Arns}:*", ":*,", ",", ":execution:", ":stateMachine:", ","):
                return join_list[1]["Ref"]
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        return None

    def walk_leaves(self, arg: Any, where: str) -> Iterable[str]:
        if isinstance(arg, list):
            for item in arg:
                yield from self.walk_leaves(item, where)
        elif intrinsic(arg) is not None:
            yield from self.resolve(arg, where)
        elif isinstance(arg, (str, int, float)):
            yield str(arg)

    def substitute(self, text: str, variables: dict[str, Any], where: str) -> list[str]:
        pieces: list[list[str]] = []
        position = 0
        for match in re.finditer(r"\$\{([^}!][^}]*)\}", text):
            pieces.append([text[position : match.start()]])
            name = match.group(1)
            if name in variables:
                pieces.append(self.resolve(variables[name], where))
            elif "." in name:
                resource, attribute = name.split(".", 1)
                pieces.append([self.getatt(resource, attribute)])
            else:
                pieces.append(self.resolve({"Ref": name}, where))
            position = match.end()
        pieces.append([text[position:]])
        return ["".join(combo) for combo in itertools.product(*pieces)]

    def getatt(self, name: str, attribute: str) -> str:
        kind = self.resources.get(name, {}).get("Type")
        if kind == "AWS::Logs::LogGroup" and attribute == "Arn":
            return f"arn:<partition>:logs:<region>:<account>:log-group:<{name}>:*"
        return f"<{name}.{attribute}>"

    # -- statements ------------------------------------------------------------------
    def check_statement(self, statement: dict[str, Any], where: str, role: str | None) -> None:
        if statement.get("Effect") != "Allow":
            return
        sid = statement.get("Sid")
        where = f"{where} statement {sid}" if sid else where
        for key in ("NotAction", "NotResource"):
            if key in statement:
                self.problems.append(f"{where}: {key} allows everything it does not name")
        actions: list[str] = []
        for action in as_list(statement.get("Action", [])):
            if not isinstance(action, str):
                self.problems.append(f"{where}: Action {action!r} is not a literal action name")
                continue
            actions.append(action)
            if WILDCARD.search(action):
                self.problems.append(f"{where}: wildcard Action {action!r}")
        literal = [action for action in actions if not WILDCARD.search(action)]
        for issue, detail in parliament_findings(literal) if literal else []:
            if issue in ("UNKNOWN_ACTION", "UNKNOWN_PREFIX"):  # RESOURCE_STAR: the '*' of this probe
                self.problems.append(f"{where}: parliament {issue}: {detail}")
        for resource in as_list(statement.get("Resource", [])):
            try:
                candidates = self.resolve(resource, where)
            except Unresolvable as error:
                self.problems.append(f"{where}: cannot tell what Resource {error} resolves to")
                continue
            for candidate in candidates:
                if not WILDCARD.search(candidate):
                    continue
                if candidate == "*" and actions:
                    # Only a listed statement, for its listed actions, and only those parliament
                    # finds no resource-level permission for: both must hold.
                    listed = self.star_statements.get((role, sid)) if role and isinstance(sid, str) else None
                    findings = parliament_findings(actions)
                    if listed is None:
                        self.problems.append(f"{where}: Resource '*' for {sorted(actions)}: only the statements "
                                             f"STAR_STATEMENTS lists may have '*', not {role} statement {sid}")
                    elif not set(actions) <= listed:
                        self.problems.append(f"{where}: Resource '*' for {sorted(set(actions) - listed)}: not an "
                                             f"action STAR_STATEMENTS allows this statement ({sorted(listed)})")
                    elif findings:
                        self.problems.append(f"{where}: Resource '*' for {sorted(actions)}: parliament: {findings}")
                    else:
                        self.allowed.append(f"{where}: '*' for {sorted(actions)} (listed; parliament: no "
                                            "resource-level permissions)")
                    continue
                if EXECUTION_ARN.match(candidate) and actions and set(actions) <= EXECUTION_ACTIONS:
                    self.allowed.append(f"{where}: {candidate} for {sorted(actions)}")
                    continue
                bucket = LOCK_OBJECT_ARN.match(candidate)
                if (bucket and actions and set(actions) <= LOCK_OBJECT_ACTIONS
                        and (self.resources.get(bucket.group("bucket"), {}) or {}).get("Type") == "AWS::S3::Bucket"):
                    self.allowed.append(f"{where}: {candidate} for {sorted(actions)} (lock objects under a fixed prefix)")
                    continue
                versions = FUNCTION_VERSIONS_ARN.match(candidate)
                if (versions and actions == ["lambda:InvokeFunction"]
                        and (self.resources.get(versions.group("function"), {}) or {}).get("Type") in FUNCTION_TYPES):
                    self.allowed.append(f"{where}: {candidate} for lambda:InvokeFunction (every version of a "
                                        "function of this stack)")
                    continue
                if LOCK_PARAMETER_ARN.match(candidate) and actions and set(actions) <= LOCK_PARAMETER_ACTIONS:
                    self.allowed.append(f"{where}: {candidate} for {sorted(actions)} (lock parameters under the "
                                        "stack's path)")
                    continue
                self.problems.append(f"{where}: wildcard Resource {candidate!r} for {sorted(actions)}")

    def check_document(self, document: Any, where: str, role: str | None) -> None:
        if not isinstance(document, dict):
            self.problems.append(f"{where}: policy document {document!r} cannot be checked")
            return
        for statement in as_list(document.get("Statement", [])):
            if isinstance(statement, dict) and intrinsic(statement) is None:
                self.check_statement(statement, where, role)
            elif intrinsic(statement) and intrinsic(statement)[0] == "Fn::If":
                _, (_, yes, no) = intrinsic(statement)
                for branch in (yes, no):
                    if isinstance(branch, dict) and intrinsic(branch) is None:
                        self.check_statement(branch, where, role)
            else:
                self.problems.append(f"{where}: statement {statement!r} cannot be checked")

    def run(self) -> list[str]:
        for name, resource in self.resources.items():
            kind = resource.get("Type")
            if kind not in IAM_TYPES:
                continue
            role = name if kind == "AWS::IAM::Role" else None  # STAR_STATEMENTS names roles only
            properties = resource.get("Properties", {}) or {}
            if "PolicyDocument" in properties:
                self.check_document(properties["PolicyDocument"], name, role)
            for policy in as_list(properties.get("Policies", [])):
                if intrinsic(policy) and intrinsic(policy)[0] == "Fn::If":
                    branches = intrinsic(policy)[1][1:]
                else:
                    branches = [policy]
                for branch in branches:
                    if isinstance(branch, dict) and "PolicyDocument" in branch:
                        self.check_document(branch["PolicyDocument"], f"{name} policy {branch.get('PolicyName', '?')}",
                                            role)
            for arn in as_list(properties.get("ManagedPolicyArns", [])):
                if not (isinstance(arn, str) and ALLOWED_MANAGED_POLICY.match(arn)):
                    self.problems.append(f"{name}: managed policy {arn!r} (only AWSLambdaBasicExecutionRole is allowed)")
                else:
                    self.allowed.append(f"{name}: managed policy AWSLambdaBasicExecutionRole (attached by SAM)")
        return self.problems


def check(template: dict[str, Any], allowed: list[str] | None = None,
          star_statements: dict[tuple[str, str], frozenset[str]] | None = None) -> list[str]:
    try:
        expanded = transform(template)
    except TemplateError as error:
        return [f"SAM transform failed: {error}"]
    checker = Checker(expanded, star_statements)
    problems = checker.run()
    if allowed is not None:
        allowed.extend(checker.allowed)
    return problems


# -- self-test -------------------------------------------------------------------------
def _function(policies: Any, events: Any = None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "Runtime": "python3.13",
        "Handler": "index.handler",
        "InlineCode": "def handler(event, context):\n    return event\n",
        "Policies": policies,
    }
    if events:
        properties["Events"] = events
    return {"Type": "AWS::Serverless::Function", "Properties": properties}


def _template(resources: dict[str, Any], parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Parameters": {
            "TargetArn": {
                "Type": "String",
                "AllowedPattern": r"^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]+$",
            },
            "Loose": {"Type": "String"},
        },
        "Resources": {
            "Table": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "BillingMode": "PAY_PER_REQUEST",
                    "AttributeDefinitions": [{"AttributeName": "k", "AttributeType": "S"}],
                    "KeySchema": [{"AttributeName": "k", "KeyType": "HASH"}],
                },
            },
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Logs": {"Type": "AWS::Logs::LogGroup"},
            **resources,
        },
    }
    base["Parameters"].update(parameters or {})
    return base


def _statement(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource, **extra}]}


def _machine(policies: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::Serverless::StateMachine",
        "Properties": {"Definition": {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
                       "Policies": policies},
    }


TABLE_ARN = {"Fn::GetAtt": ["Table", "Arn"]}
EXECUTIONS = {
    "Fn::Sub": [
        "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${Name}:*",
        {"Name": {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": "TargetArn"}]}]}},
    ]
}
SELF_TEST_BAD = {
    "action '*'": _function([_statement("*", TABLE_ARN)]),
    "action 'dynamodb:*'": _function([_statement("dynamodb:*", TABLE_ARN)]),
    "action 'dynamodb:Get*'": _function([_statement(["dynamodb:UpdateItem", "dynamodb:Get*"], TABLE_ARN)]),
    "resource '*'": _function([_statement("dynamodb:UpdateItem", "*")]),
    "resource table/*": _function([_statement("dynamodb:Query", {"Fn::Sub": "${Table.Arn}/index/*"})]),
    "log group Arn (ends in :*)": _function([_statement("logs:PutLogEvents", {"Fn::GetAtt": ["Logs", "Arn"]})]),
    "NotAction": _function([{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": TABLE_ARN}]}]),
    "SAM LambdaInvokePolicy (function:NAME*)": _function([{"LambdaInvokePolicy": {"FunctionName": "other"}}]),
    "SAM DynamoDBCrudPolicy (table/NAME/index/*)": _function([{"DynamoDBCrudPolicy": {"TableName": {"Ref": "Table"}}}]),
    "managed policy by name": _function(["AmazonDynamoDBFullAccess"]),
    "SAM SQS event (AWSLambdaSQSQueueExecutionRole)": _function(
        [], {"Q": {"Type": "SQS", "Properties": {"Queue": {"Fn::GetAtt": ["Queue", "Arn"]}}}}
    ),
    "unconstrained parameter as Resource": _function([_statement("dynamodb:UpdateItem", {"Ref": "Loose"})]),
    "log delivery on '*' plus another action": _function(
        [_statement(sorted(LOG_DELIVERY_ACTIONS) + ["dynamodb:UpdateItem"], "*")]
    ),
    "a misspelt action": _function([_statement("dynamodb:UpdateItems", TABLE_ARN)]),
    "an unknown service": _function([_statement("dynamodbb:UpdateItem", TABLE_ARN)]),
    "s3:GetObject on '*' (it has resource-level permissions)": _function([_statement("s3:GetObject", "*")]),
    "cloudwatch:PutMetricData on '*' (no resource-level permissions, but not listed)": _function(
        [_statement("cloudwatch:PutMetricData", "*")]
    ),
    "sqs:ListQueues on '*' (no resource-level permissions, but not listed)": _function(
        [_statement("sqs:ListQueues", "*")]
    ),
    "task-token action on '*' in a statement not listed": _function(
        [_statement("states:SendTaskSuccess", "*", Sid="AdmitQueuedWaiters")]
    ),
    "execution wildcard for StartExecution": _function([_statement("states:StartExecution", EXECUTIONS)]),
    "task-token action on '*' plus another action": _function(
        [_statement(["states:SendTaskSuccess", "states:StopExecution"], "*")]
    ),
    "StartExecution on '*' (it has resource-level permissions)": _function([_statement("states:StartExecution", "*")]),
    "wildcard execution name": _function(
        [_statement("states:DescribeExecution", {"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:*:*"})]
    ),
    "S3 objects of the whole bucket": _function(
        [_statement("s3:GetObject", {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/*"})]
    ),
    "S3 objects of any bucket": _function(
        [_statement("s3:GetObject", {"Fn::Sub": "arn:${AWS::Partition}:s3:::*/locks/*"})]
    ),
    "S3 objects of a bucket named by a parameter": _function(
        [_statement("s3:GetObject", {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Loose}/locks/*"})]
    ),
    "S3 lock objects for s3:PutObjectAcl": _function(
        [_statement(["s3:PutObject", "s3:PutObjectAcl"], {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/locks/*"})]
    ),
    "S3 prefix with a wildcard in it": _function(
        [_statement("s3:GetObject", {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/lo*/*"})]
    ),
    "SSM parameters of every stack": _function(
        [_statement("ssm:PutParameter",
                    {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/*"})]
    ),
    "SSM lock parameters for ssm:LabelParameterVersion": _function(
        [_statement("ssm:LabelParameterVersion", {"Fn::Sub":
                    "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/${AWS::StackName}/*"})]
    ),
    "versions of a function for lambda:UpdateFunctionCode": _function(
        [_statement(["lambda:InvokeFunction", "lambda:UpdateFunctionCode"], {"Fn::Sub": "${Table.Arn}:*"})]
    ),
    "versions of a resource that is no function": _function(
        [_statement("lambda:InvokeFunction", {"Fn::Sub": "${Table.Arn}:*"})]
    ),
    "versions of a function named by a parameter": _function(
        [_statement("lambda:InvokeFunction", {"Fn::Sub": "${Loose}:*"})]
    ),
    "Fn::If branch with '*'": _function(
        [_statement("dynamodb:UpdateItem", {"Fn::If": ["Always", TABLE_ARN, "*"]})]
    ),
    "state machine resource '*'": {
        "Type": "AWS::Serverless::StateMachine",
        "Properties": {
            "Definition": {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
            "Policies": [_statement("lambda:InvokeFunction", "*")],
        },
    },
    "hand-written IAM role": {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": _statement("sts:AssumeRole", "*"),
            "Policies": [{"PolicyName": "p", "PolicyDocument": _statement("sqs:*", {"Fn::GetAtt": ["Queue", "Arn"]})}],
        },
    },
}
SELF_TEST_GOOD = {
    "Good": _function(
        [
            _statement("dynamodb:UpdateItem", TABLE_ARN),
            _statement("dynamodb:Query", {"Fn::Sub": "${Table.Arn}/index/owner-index"}),
            _statement(["states:DescribeExecution", "states:StopExecution"], EXECUTIONS),
            _statement("states:StartExecution", {"Ref": "TargetArn"}),
            _statement(["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                       {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/locks/*"}),
            _statement("s3:ListBucket", {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}"}),
            _statement("lambda:InvokeFunction", {"Fn::Sub": "${Good.Arn}:*"}),
            _statement(["ssm:GetParametersByPath", "ssm:PutParameter", "ssm:DeleteParameters"], {"Fn::Sub":
                       "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/${AWS::StackName}/*"}),
        ]
    ),
    # '*' in the statements STAR_STATEMENTS lists, for their actions.
    "AcquireLockFunction": _function([_statement("states:SendTaskSuccess", "*", Sid="AdmitQueuedWaiters")]),
    "ReleaseLockFunction": _function([_statement("states:SendTaskSuccess", "*", Sid="HandOffToQueuedWaiters")]),
    "LockedWorkflowStateMachine": _machine([_statement(sorted(LOG_DELIVERY_ACTIONS), "*", Sid="DeliverExecutionLogs")]),
}


# Planted in a copy of the shipped template.yaml, each must be refused: an action
# parliament finds no resource-level permission for (so '*' is all it takes) is not
# thereby allowed '*'; only the statements STAR_STATEMENTS names may have it, and only
# for the actions named there.
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def _add_statement(resource: str, statement: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A mutation: one more policy document, of `statement`, in `resource`'s Policies."""
    def mutate(template: dict[str, Any]) -> None:
        policies = template["Resources"][resource]["Properties"]["Policies"]
        policies.append({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **statement}]})
    return mutate


def _widen(resource: str, sid: str, action: str) -> Callable[[dict[str, Any]], None]:
    """A mutation: `action` added to every statement `sid` of `resource`'s Policies."""
    def mutate(template: dict[str, Any]) -> None:
        found = 0

        def walk(node: Any) -> None:
            nonlocal found
            if isinstance(node, dict):
                if node.get("Sid") == sid and "Action" in node:
                    node["Action"] = as_list(node["Action"]) + [action]
                    found += 1
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)
        walk(template["Resources"][resource]["Properties"]["Policies"])
        if not found:
            raise AssertionError(f"no statement {sid} in {resource}'s Policies: the mutation is stale")
    return mutate


TEMPLATE_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {}
for _action in ("cloudwatch:PutMetricData", "sqs:ListQueues"):
    TEMPLATE_MUTATIONS.update({
        f"{_action} on '*' in a new statement of AcquireLockFunction's policies":
            _add_statement("AcquireLockFunction", {"Sid": "Extra", "Action": _action, "Resource": "*"}),
        f"{_action} on '*' in a new statement without Sid of ReleaseLockFunction's policies":
            _add_statement("ReleaseLockFunction", {"Action": _action, "Resource": "*"}),
        f"{_action} on '*' in a new statement of LockedWorkflowStateMachine's policies":
            _add_statement("LockedWorkflowStateMachine", {"Sid": "Extra", "Action": _action, "Resource": "*"}),
        f"{_action} added to AcquireLockFunction's AdmitQueuedWaiters (Resource '*')":
            _widen("AcquireLockFunction", "AdmitQueuedWaiters", _action),
        f"{_action} added to ReleaseExecutionLocksFunction's HandOffToQueuedWaiters (Resource '*')":
            _widen("ReleaseExecutionLocksFunction", "HandOffToQueuedWaiters", _action),
        f"{_action} added to QueuedWorkflowStateMachine's DeliverExecutionLogs (Resource '*')":
            _widen("QueuedWorkflowStateMachine", "DeliverExecutionLogs", _action),
        f"{_action} on '*' in a new statement named DeliverExecutionLogs of AcquireLockFunction":
            _add_statement("AcquireLockFunction", {"Sid": "DeliverExecutionLogs", "Action": _action, "Resource": "*"}),
    })
TEMPLATE_MUTATIONS.update({
    "states:SendTaskFailure added to AcquireLockFunction's AdmitQueuedWaiters (not called: code-facts)":
        _widen("AcquireLockFunction", "AdmitQueuedWaiters", "states:SendTaskFailure"),
    "states:SendTaskSuccess on '*' in a state machine's role, as statement AdmitQueuedWaiters":
        _add_statement("LockedWorkflowStateMachine",
                       {"Sid": "AdmitQueuedWaiters", "Action": "states:SendTaskSuccess", "Resource": "*"}),
    "log delivery on '*' in a function's role, as statement DeliverExecutionLogs":
        _add_statement("AcquireLockFunction",
                       {"Sid": "DeliverExecutionLogs", "Action": sorted(LOG_DELIVERY_ACTIONS), "Resource": "*"}),
})


def template_self_test(path: Path = TEMPLATE) -> int:
    failures = 0
    shipped = load(path)
    for label, mutate in TEMPLATE_MUTATIONS.items():
        template = copy.deepcopy(shipped)
        try:
            mutate(template)
        except (AssertionError, KeyError) as error:
            failures += 1
            print(f"FAIL cannot plant {label}: {error!r}")
            continue
        problems = check(template)
        if problems and not any(p.startswith("SAM transform failed") for p in problems):
            print(f"ok   rejects template.yaml + {label}: {problems[0]}")
        else:
            failures += 1
            print(f"FAIL did not reject template.yaml + {label}: {problems}")
    return failures


def parliament_self_test() -> int:
    """Parliament's half: every action STAR_STATEMENTS lists has no resource-level
    permission, and a listed statement is still refused '*' for an action that has one."""
    failures = 0
    for (role, sid), actions in STAR_STATEMENTS.items():
        findings = parliament_findings(sorted(actions))
        print(f"{'FAIL' if findings else 'ok  '} {role} {sid}: parliament on '*' for {sorted(actions)}: "
              f"{findings or 'no resource-level permissions'}")
        failures += bool(findings)
    # A list that (wrongly) names states:StopExecution, which takes an execution ARN.
    actions = ["states:SendTaskSuccess", "states:StopExecution"]
    listed = {("SubjectRole", "Listed"): frozenset(actions)}
    problems = check(_template({"Subject": _function([_statement(actions, "*", Sid="Listed")])}),
                     star_statements=listed)
    if any("RESOURCE_STAR" in problem for problem in problems):
        print(f"ok   rejects states:StopExecution on '*' in a listed statement that lists it: {problems[0]}")
    else:
        failures += 1
        print(f"FAIL did not reject states:StopExecution on '*' in a listed statement that lists it: {problems}")
    return failures


PARLIAMENT_CASES = len(STAR_STATEMENTS) + 1


def self_test() -> int:
    failures = template_self_test() + parliament_self_test()
    for label, resource in SELF_TEST_BAD.items():
        template = _template({"Subject": resource})
        template["Conditions"] = {"Always": {"Fn::Equals": ["a", "a"]}}
        problems = check(template)
        if problems and not any(p.startswith("SAM transform failed") for p in problems):
            print(f"ok   rejects {label}: {problems[0]}")
        else:
            failures += 1
            print(f"FAIL did not reject {label}: {problems}")
    problems = check(_template(SELF_TEST_GOOD))
    if problems:
        failures += 1
        print(f"FAIL rejected the good policies: {problems}")
    else:
        print("ok   accepts the good policies")
    total = len(SELF_TEST_BAD) + len(TEMPLATE_MUTATIONS) + PARLIAMENT_CASES + 1
    print(f"iam_wildcards self-test: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    path = Path(argv[1] if len(argv) > 1 else "template.yaml")
    allowed: list[str] = []
    try:
        problems = check(load(path), allowed)
    except TemplateError as error:
        problems = [str(error)]
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        print(f"iam_wildcards: {len(problems)} problem(s)")
        return 1
    for exception in allowed:
        print(f"  allowed: {exception}")
    print(f"iam_wildcards: {path}: no wildcard beyond the {len(allowed)} documented exceptions above")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
