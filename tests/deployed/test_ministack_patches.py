"""ministack_patches.py: SSM calls that name several parameters, or a path,
are authorized per parameter ARN, as the Service Authorization Reference says
AWS does (the module's docstring quotes it). In process, on ministack's own
functions; the SSM stack's scenarios (test_skip.py's scheduled start) show it
deployed: without the patch, every SSM acquire is denied ssm:GetParameters on
"*" and the execution fails."""

from __future__ import annotations

import json

import ministack_patches as patches

REGION, ACCOUNT = "us-east-1", "000000000000"
ARN = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter"


def call(action: str, body: dict) -> tuple[dict, bytes]:
    return {"x-amz-target": f"AmazonSSM.{action}"}, json.dumps(body).encode()


def test_a_batch_names_each_of_its_parameters():
    headers, body = call("GetParameters", {"Names": ["/sfn-lock/s/a", "sfn-lock/s/b"]})
    assert patches.ssm_resources(headers, body, REGION, ACCOUNT) == [
        f"{ARN}/sfn-lock/s/a", f"{ARN}/sfn-lock/s/b"]
    headers, body = call("DeleteParameters", {"Names": ["/x"]})
    assert patches.ssm_resources(headers, body, REGION, ACCOUNT) == [f"{ARN}/x"]


def test_a_path_is_the_parameter_arn_it_spells():
    headers, body = call("GetParametersByPath", {"Path": "/sfn-lock/s/.owners/ab/", "Recursive": True})
    assert patches.ssm_resources(headers, body, REGION, ACCOUNT) == [f"{ARN}/sfn-lock/s/.owners/ab/"]


def test_other_calls_and_malformed_bodies_are_left_to_ministack():
    for action, body in [("GetParameter", {"Name": "/x"}), ("GetParameters", {"Names": []}),
                         ("GetParameters", {"Names": [3]}), ("GetParametersByPath", {})]:
        headers, raw = call(action, body)
        assert patches.ssm_resources(headers, raw, REGION, ACCOUNT) == [], action
    assert patches.ssm_resources({"x-amz-target": "AmazonSSM.GetParameters"}, b"{", REGION, ACCOUNT) == []


def test_every_named_parameter_is_enforced_and_the_first_denial_answers(monkeypatch):
    seen = []
    denied = {f"{ARN}/b"}

    def fake_enforce(key, action, service, region, resource_arn="*", service_context=None):
        seen.append(resource_arn)
        return "denied" if resource_arn in denied else None

    monkeypatch.setattr(patches, "_enforce", fake_enforce)
    monkeypatch.setattr(patches, "_extract", lambda *args: "*")
    headers, body = call("GetParameters", {"Names": ["/a", "/b", "/c"]})
    first = patches.extract_resource_arn("ssm", "POST", "/", headers, body, {}, REGION, ACCOUNT)
    assert first == f"{ARN}/a"
    assert patches.enforce("k", "ssm:GetParameters", "ssm", REGION, first) == "denied"
    assert seen == [f"{ARN}/a", f"{ARN}/b"]
    # The next call starts afresh: nothing left over from this one.
    seen.clear()
    assert patches.extract_resource_arn("dynamodb", "POST", "/", {}, b"{}", {}, REGION, ACCOUNT) == "*"
    assert patches.enforce("k", "dynamodb:GetItem", "dynamodb", REGION, "*") is None
    assert seen == ["*"]
