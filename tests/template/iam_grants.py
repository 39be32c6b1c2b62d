"""The IAM statements a lock function's role gets, read from template.yaml after
the SAM transform: the `Policies` written under the function, what SAM policy
templates expand to, and any AWS::IAM::Policy attached to its role. Only store
actions (dynamodb:, s3:, ssm:) and the task-token actions
states:SendTask{Success,Failure,Heartbeat} (and wildcards that cover them) are read;
function_permissions.py compares them with what the code calls.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any

from cfn_template import intrinsic

# The queue's hand-off: a waker's wake() is one SendTaskSuccess. These actions have
# no resource types in the Service Authorization Reference: "*" is their resource.
TASK_TOKEN_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
BASIC_EXECUTION_ROLE = re.compile(r"^arn:[^:]+:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole$")


@dataclass(frozen=True)
class Grant:
    action: str  # as written: dynamodb:UpdateItem, dynamodb:*, *
    resource: str  # as text: ${LockTable.Arn}, ${LockTable.Arn}/index/owner-index, arn:...
    conditional: bool
    where: str
    condition: str = ""  # the statement's Condition, as JSON ("" for none)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _branches(value: Any, conditional: bool = False) -> list[tuple[Any, bool]]:
    """The values an Fn::If can take (AWS::NoValue dropped), each with whether it
    hangs on a condition."""
    fn = intrinsic(value)
    if fn and fn[0] == "Fn::If":
        return [found for branch in fn[1][1:] for found in _branches(branch, True)]
    if fn and fn == ("Ref", "AWS::NoValue"):
        return []
    return [(value, conditional)]


def _text(value: Any) -> str:
    """A Resource value as one string: ${Name.Attribute} for !GetAtt, ${Name} for !Ref."""
    if isinstance(value, (str, int, float)):
        return str(value)
    fn = intrinsic(value)
    if fn:
        key, arg = fn
        if key == "Ref":
            return f"${{{arg}}}"
        if key == "Fn::GetAtt":
            return "${" + (arg if isinstance(arg, str) else ".".join(arg)) + "}"
        if key == "Fn::Sub" and isinstance(arg, str):
            return arg
        if key == "Fn::Sub" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str):
            text, variables = arg
            for name, variable in (variables or {}).items():
                text = text.replace(f"${{{name}}}", _text(variable))
            return text
        if key == "Fn::Join" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], list):
            return str(arg[0]).join(_text(part) for part in arg[1])
    return json.dumps(value, sort_keys=True)


def _resources(value: Any, conditional: bool) -> list[tuple[str, bool]]:
    found = []
    for item, item_conditional in _branches(value, conditional):
        for element in _as_list(item):
            for leaf, leaf_conditional in _branches(element, item_conditional):
                found.append((_text(leaf), leaf_conditional))
    return found


def _is_checked(action: str) -> bool:
    """Whether the action (or pattern) can grant a store action (dynamodb, s3, ssm) or a
    task-token action."""
    service = action.split(":", 1)[0] if ":" in action else action
    return (any(fnmatch.fnmatchcase(store, service.lower()) for store in ("dynamodb", "s3", "ssm"))
            or action.strip() == "*"
            or any(fnmatch.fnmatchcase(known.lower(), action.lower()) for known in TASK_TOKEN_ACTIONS))


def _documents(expanded: dict, function: str) -> tuple[list[tuple[Any, str]], list[str]]:
    """(the policy documents of the function's role, with where each is; what cannot be read)."""
    resources = expanded.get("Resources", {}) or {}
    lam = resources.get(function, {})
    if lam.get("Type") != "AWS::Lambda::Function":
        return [], [f"{function}: not a function after the SAM transform"]
    role = intrinsic((lam.get("Properties", {}) or {}).get("Role"))
    name = None
    if role and role[0] == "Fn::GetAtt":  # SAM's own role: !GetAtt <Function>Role.Arn
        name = (role[1] if isinstance(role[1], str) else role[1][0]).split(".")[0]
    if name is None or (resources.get(name, {}) or {}).get("Type") != "AWS::IAM::Role":
        return [], [f"{function}: its role is not one of this template's AWS::IAM::Role resources; "
                    "its permissions cannot be checked"]
    properties = resources[name].get("Properties", {}) or {}
    documents, unreadable = [], []
    for policy, _ in [b for p in _as_list(properties.get("Policies", [])) for b in _branches(p)]:
        if isinstance(policy, dict) and "PolicyDocument" in policy:
            documents.append((policy["PolicyDocument"], f"{name} {policy.get('PolicyName', '?')}"))
    attached = {other for other, resource in resources.items()
                if resource.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
                and {"Ref": name} in _as_list((resource.get("Properties", {}) or {}).get("Roles", []))}
    for arn, _ in [b for a in _as_list(properties.get("ManagedPolicyArns", [])) for b in _branches(a)]:
        ref = intrinsic(arn)
        if ref and ref[0] == "Ref" and (resources.get(ref[1], {}) or {}).get("Type") == "AWS::IAM::ManagedPolicy":
            attached.add(ref[1])
        elif not (isinstance(arn, str) and BASIC_EXECUTION_ROLE.match(arn)):
            unreadable.append(f"{function}: managed policy {_text(arn)} on its role: this check cannot see what "
                              "it grants; grant DynamoDB actions in the function's Policies")
    for other in sorted(attached):
        documents.append(((resources[other].get("Properties", {}) or {}).get("PolicyDocument", {}), other))
    return documents, unreadable


def grants(expanded: dict, function: str) -> tuple[list[Grant], list[str]]:
    """The function's dynamodb grants, and what in its role cannot be evaluated."""
    documents, unreadable = _documents(expanded, function)
    found: list[Grant] = []
    for document, where in documents:
        for raw in _as_list((document or {}).get("Statement", [])):
            for statement, conditional in _branches(raw):
                if not isinstance(statement, dict):
                    unreadable.append(f"{function}: {where}: a statement this check cannot read: {statement!r}")
                    continue
                label = f"{where} Sid {statement.get('Sid', '(none)')}"
                if "NotAction" in statement:
                    unreadable.append(f"{function}: {label}: NotAction (it grants every other action, dynamodb too)")
                    continue
                written = _as_list(statement.get("Action", []))
                if any(not isinstance(action, str) for action in written):
                    unreadable.append(f"{function}: {label}: an Action that is not a plain string: {written!r}")
                    continue
                actions = [action for action in written if _is_checked(action)]
                if not actions:
                    continue
                if statement.get("Effect") != "Allow":
                    unreadable.append(f"{function}: {label}: a {statement.get('Effect')} of {actions}: "
                                      "this check evaluates Allow statements only")
                    continue
                if "NotResource" in statement:
                    unreadable.append(f"{function}: {label}: NotResource for {actions}")
                    continue
                condition = json.dumps(statement["Condition"], sort_keys=True) if statement.get("Condition") else ""
                for resource, resource_conditional in _resources(statement.get("Resource", []), conditional):
                    found += [Grant(action, resource, resource_conditional, label, condition) for action in actions]
    return found, unreadable



