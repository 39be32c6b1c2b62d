#!/usr/bin/env python3
"""TargetStateMachineArn: every valid state machine name, and only this stack's account
and Region.

Why Python, not a tool: it evaluates the parameters' AllowedPattern regexes (one built
with !Sub from the stack's partition, Region and account) against sample names and
ARNs; Guard and cfn-lint compare values, they do not run a template's regex.

1. The parameter's AllowedPattern accepts every name CreateStateMachine accepts (1 to 80
   characters; none of white space, < > { } [ ] ? * " # % \\ ^ | ~ ` $ & , ; : / or a
   control character), '.' included, and refuses the others, version and alias ARNs.
2. CloudFormation Rules cannot take an ARN apart (rule assertions allow only Ref and the
   rule functions), so the template checks the account and Region with
   TargetStateMachineArnCheck, an SSM parameter whose AllowedPattern is built with !Sub
   from the stack's own partition, Region and account: SSM refuses a value that does not
   match, which fails the stack before the attach variant exists. This evaluates that
   pattern for a stack in us-east-1 / 123456789012 against same-Region, cross-Region,
   cross-account and cross-partition ARNs, and checks the wiring (same condition as the
   attach variant, which DependsOn it).

Usage: target_state_machine.py [TEMPLATE]   (default: template.yaml)
       target_state_machine.py --self-test  (proves each failure is caught)
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load  # noqa: E402

PARTITION, REGION, ACCOUNT = "aws", "us-east-1", "123456789012"
PREFIX = f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:"
VALID_NAMES = ["nightly-etl", "a", "nightly.etl.v2", "x" * 80, "Team_A@prod+1=ok", "ünïcode-名前", "a'b(c)!"]
INVALID_NAMES = ["", "x" * 81, "a b", "a\tb", "a:b", "a/b", "a*", "a?", "a<b", "a{b}", "a[b]", 'a"b', "a#b",
                 "a%b", "a\\b", "a^b", "a|b", "a~b", "a`b", "a$b", "a&b", "a,b", "a;b", "a\x01b", "a\x7fb"]
SAME = [PREFIX + "nightly.etl", PREFIX + "nightly-etl"]
FOREIGN = [
    f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:nightly-etl",
    f"arn:aws:states:us-east-2:{ACCOUNT}:stateMachine:nightly-etl",
    f"arn:aws:states:{REGION}:210987654321:stateMachine:nightly-etl",
    f"arn:aws-cn:states:{REGION}:{ACCOUNT}:stateMachine:nightly-etl",
    PREFIX + "nightly-etl:1",
]


def sub(value: Any) -> str:
    """An !Sub string with the stack's pseudo parameters, as CloudFormation resolves it."""
    fn = intrinsic(value)
    if fn is None or fn[0] != "Fn::Sub" or not isinstance(fn[1], str):
        raise TemplateError(f"expected !Sub with a string, got {value!r}")
    pseudo = {"AWS::Partition": PARTITION, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}

    def one(match: re.Match[str]) -> str:
        if match.group(1) not in pseudo:
            raise TemplateError(f"!Sub uses ${{{match.group(1)}}}, not a pseudo parameter")
        return pseudo[match.group(1)]

    return re.sub(r"\$\{([^}!]+)\}", one, fn[1])


def check(template: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    parameter = template.get("Parameters", {}).get("TargetStateMachineArn", {})
    pattern = parameter.get("AllowedPattern", "")
    if not re.fullmatch(pattern, ""):
        problems.append("TargetStateMachineArn: the empty default (no attach variant) is refused")
    for name in VALID_NAMES:
        if not re.fullmatch(pattern, PREFIX + name):
            problems.append(f"TargetStateMachineArn: AllowedPattern refuses the valid name {name!r}")
    for name in INVALID_NAMES:
        if re.fullmatch(pattern, PREFIX + name):
            problems.append(f"TargetStateMachineArn: AllowedPattern accepts the invalid name {name!r}")
    if re.fullmatch(pattern, PREFIX + "nightly-etl:1"):
        problems.append("TargetStateMachineArn: AllowedPattern accepts a version ARN")

    resources = template.get("Resources", {})
    guard = resources.get("TargetStateMachineArnCheck")
    if not guard or guard.get("Type") != "AWS::SSM::Parameter":
        return problems + ["TargetStateMachineArnCheck: no AWS::SSM::Parameter guards the target's account and Region"]
    properties = guard.get("Properties", {})
    if properties.get("Value") != {"Ref": "TargetStateMachineArn"}:
        problems.append("TargetStateMachineArnCheck: Value is not !Ref TargetStateMachineArn")
    try:
        regional = sub(properties.get("AllowedPattern"))
    except TemplateError as error:
        return problems + [f"TargetStateMachineArnCheck: AllowedPattern: {error}"]
    for arn in SAME:
        if not re.search(regional, arn):
            problems.append(f"TargetStateMachineArnCheck: refuses {arn} in the stack's own Region and account")
    for arn in FOREIGN:
        if re.search(regional, arn):
            problems.append(f"TargetStateMachineArnCheck: accepts {arn}, outside the stack's Region, account or partition")
    attached = resources.get("AttachedWorkflowStateMachine", {})
    if guard.get("Condition") != attached.get("Condition"):
        problems.append("TargetStateMachineArnCheck: not under the attach variant's Condition")
    depends = attached.get("DependsOn", [])
    if "TargetStateMachineArnCheck" not in ([depends] if isinstance(depends, str) else depends):
        problems.append("AttachedWorkflowStateMachine: does not DependsOn TargetStateMachineArnCheck")
    return problems


def self_test(template: dict[str, Any]) -> int:
    def mutated(change) -> dict[str, Any]:
        copied = copy.deepcopy(template)
        change(copied)
        return copied

    def set_pattern(value: str):
        return lambda t: t["Parameters"]["TargetStateMachineArn"].__setitem__("AllowedPattern", value)

    def set_guard_pattern(value: Any):
        return lambda t: t["Resources"]["TargetStateMachineArnCheck"]["Properties"].__setitem__("AllowedPattern", value)

    cases = {
        "yesterday's pattern (no '.')": set_pattern(
            "^$|^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]+$"
        ),
        "a pattern that accepts ':'": set_pattern("^$|^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:.{1,80}$"),
        "no guard": lambda t: t["Resources"].pop("TargetStateMachineArnCheck"),
        "a guard for any Region": set_guard_pattern(
            {"Fn::Sub": "^arn:${AWS::Partition}:states:[a-z0-9-]+:${AWS::AccountId}:stateMachine:[^:]+$"}
        ),
        "a guard for any account": set_guard_pattern(
            {"Fn::Sub": "^arn:${AWS::Partition}:states:${AWS::Region}:[0-9]{12}:stateMachine:[^:]+$"}
        ),
        "a guard the wrapper does not wait for": lambda t: t["Resources"]["AttachedWorkflowStateMachine"].pop("DependsOn"),
    }
    failures = 0
    for label, change in cases.items():
        problems = check(mutated(change))
        if problems:
            print(f"ok   rejects {label}: {problems[0]}")
        else:
            failures += 1
            print(f"FAIL did not reject {label}")
    print(f"target_state_machine self-test: {len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    self_testing = argv[1:2] == ["--self-test"]
    path = Path("template.yaml" if self_testing or len(argv) < 2 else argv[1])
    try:
        template = load(path)
    except TemplateError as error:
        print(f"{path}: {error}")
        return 1
    if self_testing:
        return self_test(template)
    problems = check(template)
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        print(f"target_state_machine: {len(problems)} problem(s)")
        return 1
    print(
        f"target_state_machine: {path}: {len(VALID_NAMES)} valid names accepted, {len(INVALID_NAMES)} invalid refused; "
        f"only ARNs in the stack's own partition, Region and account pass TargetStateMachineArnCheck"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
