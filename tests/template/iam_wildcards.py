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

Resource "*" is allowed only where parliament (tests/requirements-lint.txt), from
its database of the Service Authorization Reference, finds nothing: every action
in the statement has no resource-level permission (RESOURCE_STAR otherwise), as
the CloudWatch Logs log-delivery actions a state machine's role needs and the
task-token actions (states:SendTaskSuccess, ...) with which the lock functions
admit a queued waiter. Parliament also judges every Allow statement's actions
(UNKNOWN_ACTION, UNKNOWN_PREFIX: a misspelt action is refused).

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
       iam_wildcards.py --self-test  (proves the check fails on bad policies)
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load, transform  # noqa: E402
from parliament import analyze_policy_string  # noqa: E402

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
    def __init__(self, template: dict[str, Any]):
        self.template = template
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
    def check_statement(self, statement: dict[str, Any], where: str) -> None:
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
                    # Parliament knows which actions take a resource ARN: '*' only for those that do not.
                    findings = parliament_findings(actions)
                    if findings:
                        self.problems.append(f"{where}: Resource '*' for {sorted(actions)}: parliament: {findings}")
                    else:
                        self.allowed.append(f"{where}: '*' for {sorted(actions)} (parliament: no resource-level "
                                            "permissions)")
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

    def check_document(self, document: Any, where: str) -> None:
        if not isinstance(document, dict):
            self.problems.append(f"{where}: policy document {document!r} cannot be checked")
            return
        for statement in as_list(document.get("Statement", [])):
            if isinstance(statement, dict) and intrinsic(statement) is None:
                self.check_statement(statement, where)
            elif intrinsic(statement) and intrinsic(statement)[0] == "Fn::If":
                _, (_, yes, no) = intrinsic(statement)
                for branch in (yes, no):
                    if isinstance(branch, dict) and intrinsic(branch) is None:
                        self.check_statement(branch, where)
            else:
                self.problems.append(f"{where}: statement {statement!r} cannot be checked")

    def run(self) -> list[str]:
        for name, resource in self.resources.items():
            kind = resource.get("Type")
            if kind not in IAM_TYPES:
                continue
            properties = resource.get("Properties", {}) or {}
            if "PolicyDocument" in properties:
                self.check_document(properties["PolicyDocument"], name)
            for policy in as_list(properties.get("Policies", [])):
                if intrinsic(policy) and intrinsic(policy)[0] == "Fn::If":
                    branches = intrinsic(policy)[1][1:]
                else:
                    branches = [policy]
                for branch in branches:
                    if isinstance(branch, dict) and "PolicyDocument" in branch:
                        self.check_document(branch["PolicyDocument"], f"{name} policy {branch.get('PolicyName', '?')}")
            for arn in as_list(properties.get("ManagedPolicyArns", [])):
                if not (isinstance(arn, str) and ALLOWED_MANAGED_POLICY.match(arn)):
                    self.problems.append(f"{name}: managed policy {arn!r} (only AWSLambdaBasicExecutionRole is allowed)")
                else:
                    self.allowed.append(f"{name}: managed policy AWSLambdaBasicExecutionRole (attached by SAM)")
        return self.problems


def check(template: dict[str, Any], allowed: list[str] | None = None) -> list[str]:
    try:
        expanded = transform(template)
    except TemplateError as error:
        return [f"SAM transform failed: {error}"]
    checker = Checker(expanded)
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


TABLE_ARN = {"Fn::GetAtt": ["Table", "Arn"]}
# What a state machine's role needs to log to CloudWatch Logs, on '*' (Step Functions
# developer guide, "IAM policies for logging to CloudWatch Logs"): a fixture here, the
# check itself asks parliament.
LOG_DELIVERY_ACTIONS = ["logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
                        "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
                        "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"]
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
            _statement(sorted(LOG_DELIVERY_ACTIONS), "*"),
            _statement(["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"], "*"),
            _statement(["states:DescribeExecution", "states:StopExecution"], EXECUTIONS),
            _statement("states:StartExecution", {"Ref": "TargetArn"}),
            _statement(["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                       {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/locks/*"}),
            _statement("s3:ListBucket", {"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}"}),
            _statement("lambda:InvokeFunction", {"Fn::Sub": "${Good.Arn}:*"}),
            _statement(["ssm:GetParametersByPath", "ssm:PutParameter", "ssm:DeleteParameters"], {"Fn::Sub":
                       "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/${AWS::StackName}/*"}),
        ]
    )
}


def self_test() -> int:
    failures = 0
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
    print(f"iam_wildcards self-test: {len(SELF_TEST_BAD) + 1 - failures} passed, {failures} failed")
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
