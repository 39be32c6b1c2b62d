"""Where ministack 1.5.33 authorizes a call differently from AWS, the AWS way,
applied in the deployed tier's ministack process (iam_recorder.py imports this
module before ministack serves; nothing is written into the installed package).

SSM calls that name their parameters in a list or by path. ministack takes an
SSM call's resource from its `Name` field alone, so GetParameters and
DeleteParameters (`Names`) and GetParametersByPath (`Path`) are checked
against Resource "*", which a policy scoped to parameter ARNs, as the
template's are, never allows. AWS, Service Authorization Reference, "Actions,
resources, and condition keys for AWS Systems Manager": these actions have
the resource type `parameter*`, and "if the column includes a resource type,
then you can specify an ARN of that type in a statement with that action. If
the action has one or more required resources, the caller must have
permission to use the action with those resources." Here: every parameter a
batch names is checked, the first as the call's resource and the others
right after it (as ministack already does for DynamoDB batches); a path is
checked as the parameter ARN it spells.

tests/deployed/test_ministack_patches.py shows each case.
"""

from __future__ import annotations

import json
import threading

from ministack.core import iam_actions, iam_evaluator

LISTED = {"GetParameters", "DeleteParameters"}
_rest = threading.local()
_extract = iam_actions.extract_resource_arn
_enforce = iam_evaluator.enforce


def parameter_arn(name: str, region: str, account_id: str) -> str:
    return f"arn:aws:ssm:{region}:{account_id}:parameter{name if name.startswith('/') else '/' + name}"


def ssm_resources(headers: dict, body: bytes, region: str, account_id: str) -> list[str]:
    """The parameter ARNs an SSM call names in `Names` or `Path`; [] for any other."""
    action = (headers.get("x-amz-target") or "").rsplit(".", 1)[-1]
    try:
        data = json.loads(body) if body else {}
    except (ValueError, TypeError):
        return []
    if not isinstance(data, dict):
        return []
    if action in LISTED:
        names = data.get("Names")
        if isinstance(names, list) and names and all(isinstance(n, str) and n for n in names):
            return [parameter_arn(n, region, account_id) for n in names]
    if action == "GetParametersByPath" and isinstance(data.get("Path"), str) and data["Path"]:
        return [parameter_arn(data["Path"], region, account_id)]
    return []


def extract_resource_arn(service, method, path, headers, body, query_params, region, account_id):
    _rest.arns = []
    if service == "ssm":
        arns = ssm_resources(headers, body, region, account_id)
        if arns:
            _rest.arns = arns[1:]
            return arns[0]
    return _extract(service, method, path, headers, body, query_params, region, account_id)


def enforce(access_key_id, iam_action, service, region, resource_arn="*", service_context=None):
    answer = _enforce(access_key_id, iam_action, service, region, resource_arn, service_context)
    rest, _rest.arns = getattr(_rest, "arns", []), []
    for arn in rest if service == "ssm" and answer is None else []:
        answer = _enforce(access_key_id, iam_action, service, region, arn, service_context)
        if answer is not None:
            break
    return answer


def apply() -> None:
    """app.py imports both functions inside its request handler (from ...
    import): replacing the module attributes reaches every request."""
    iam_actions.extract_resource_arn = extract_resource_arn
    iam_evaluator.enforce = enforce
