#!/usr/bin/env python3
"""Every ARN the stack builds takes its partition from the stack, so that it deploys
in any partition (aws, aws-cn, aws-us-gov, ...), never from a literal "aws".

Why Python, not a tool: cfn-lint's I3042 (hardcoded partition) skips SAM templates and
plain strings outside !Sub, and no CloudFormation tool opens the DefinitionUri files.

SAM substitutes a DefinitionUri file's ${...} with DefinitionSubstitutions only: it
resolves no pseudo parameter there. So the definitions spell the service
integrations arn:${Partition}:states:::lambda:invoke (...waitForTaskToken,
states:startExecution.sync:2), and each state machine maps Partition to
!Ref AWS::Partition.

Rules
    partition-literal       no ARN with a literal partition (arn:aws:..., arn:aws-cn:...)
                            in template.yaml or statemachine/*.asl.json; a template
                            AllowedPattern that is a plain regex (arn:aws[a-z-]*:...,
                            which accepts every partition) is exempt
    partition-sub           every other ARN in template.yaml is in the text of an !Sub and
                            starts arn:${AWS::Partition}: (in a plain string,
                            ${AWS::Partition} would deploy as it is written)
    partition-asl           every ARN in statemachine/*.asl.json starts arn:${Partition}:
    partition-substitution  every state machine with a DefinitionUri maps Partition to
                            !Ref AWS::Partition in its DefinitionSubstitutions

Usage: partition.py [TEMPLATE]   (default: template.yaml; the definitions are TEMPLATE's
                                  folder's statemachine/*.asl.json)
       partition.py --self-test  (proves each failure is caught)
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# "arn:" beginning an ARN (not the end of a longer word), and what names its partition.
ARN = re.compile(r"(?<![A-Za-z0-9_-])arn:")
LITERAL_PARTITION = re.compile(r"aws(-[a-z0-9]+)*:")
TEMPLATE_PARTITION = "${AWS::Partition}:"
ASL_PARTITION = "${Partition}:"
STATE_MACHINE_TYPES = ("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine")


def _arns(text: str) -> list[str]:
    """What follows each "arn:" in `text`, up to a quote or white space (for the message)."""
    return [re.split(r'["\s]', text[match.end():], maxsplit=1)[0] for match in ARN.finditer(text)]


def _short(arn_rest: str) -> str:
    return "arn:" + (arn_rest if len(arn_rest) <= 60 else arn_rest[:57] + "...")


def template_problems(template: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def text_problems(text: str, where: str, in_sub: bool) -> None:
        for rest in _arns(text):
            if LITERAL_PARTITION.match(rest):
                found.append(f"partition-literal: {where}: {_short(rest)} names a partition; "
                             f"use !Sub arn:{TEMPLATE_PARTITION}...")
            elif not in_sub:
                found.append(f"partition-sub: {where}: {_short(rest)} is not in an !Sub: "
                             "CloudFormation would deploy it as written")
            elif not rest.startswith(TEMPLATE_PARTITION):
                found.append(f"partition-sub: {where}: {_short(rest)} does not start arn:{TEMPLATE_PARTITION}")

    def walk(value: Any, where: str, key: str | None) -> None:
        fn = intrinsic(value)
        if fn is not None and fn[0] == "Fn::Sub":
            text, variables = (fn[1], {}) if isinstance(fn[1], str) else (fn[1][0], fn[1][1] if len(fn[1]) > 1 else {})
            if isinstance(text, str):
                text_problems(text, where, True)
            walk(variables, where, None)
            return
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, f"{where}/{name}", name)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}/{index}", key)
        elif isinstance(value, str) and key != "AllowedPattern":
            text_problems(value, where, False)

    for section in ("Parameters", "Conditions", "Resources", "Outputs", "Mappings", "Rules"):
        walk(template.get(section, {}) or {}, section, None)

    for name, resource in (template.get("Resources", {}) or {}).items():
        if resource.get("Type") not in STATE_MACHINE_TYPES:
            continue
        properties = resource.get("Properties", {}) or {}
        if "DefinitionUri" not in properties and "DefinitionS3Location" not in properties:
            continue
        partition = (properties.get("DefinitionSubstitutions", {}) or {}).get("Partition")
        if partition != {"Ref": "AWS::Partition"}:
            found.append(f"partition-substitution: {name}: DefinitionSubstitutions Partition is {partition!r}, "
                         "not !Ref AWS::Partition")
    return found


def definition_problems(definitions: dict[str, str]) -> list[str]:
    found: list[str] = []
    for file, text in definitions.items():
        for rest in _arns(text):
            if LITERAL_PARTITION.match(rest):
                found.append(f"partition-literal: {file}: {_short(rest)} names a partition; "
                             f"use arn:{ASL_PARTITION}...")
            elif not rest.startswith(ASL_PARTITION):
                found.append(f"partition-asl: {file}: {_short(rest)} does not start arn:{ASL_PARTITION}")
    return found


def problems(template: dict[str, Any], definitions: dict[str, str]) -> list[str]:
    if not definitions:
        return ["no statemachine/*.asl.json to check"]
    return template_problems(template) + definition_problems(definitions)


def read_definitions(folder: Path) -> dict[str, str]:
    return {f"statemachine/{path.name}": path.read_text() for path in sorted(folder.glob("*.asl.json"))}


# -- self-test -------------------------------------------------------------------------
LOCKED = "statemachine/locked-workflow.asl.json"
# Acquire Lock's Resource, the first after the state's name.
ACQUIRE_RESOURCE = re.compile(r'("Acquire Lock": \{.*?"Resource": )"[^"]*"', re.S)


def _acquire_resource(resource: str) -> Callable[[dict[str, Any], dict[str, str]], None]:
    def change(template: dict[str, Any], definitions: dict[str, str]) -> None:
        text, count = ACQUIRE_RESOURCE.subn(lambda m: m.group(1) + f'"{resource}"', definitions[LOCKED], count=1)
        if count != 1:
            raise AssertionError(f"self-test: Acquire Lock's Resource not found in {LOCKED}")
        definitions[LOCKED] = text
    return change


def _first_sub_arn(edit: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any], dict[str, str]], None]:
    """Applies `edit` to the first {"Fn::Sub": "arn:${AWS::Partition}:..."} in the Resources
    (a policy's Resource); its result replaces that node."""
    def change(template: dict[str, Any], definitions: dict[str, str]) -> None:
        def walk(value: Any) -> bool:
            items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
            for key, item in items:
                fn = intrinsic(item)
                if fn and fn[0] == "Fn::Sub" and isinstance(fn[1], str) and fn[1].startswith("arn:" + TEMPLATE_PARTITION):
                    value[key] = edit(item)
                    return True
                if walk(item):
                    return True
            return False

        if not walk(template["Resources"]):
            raise AssertionError("self-test: no !Sub arn:${AWS::Partition}:... in the Resources")
    return change


def _substitution(machine: str, value: Any) -> Callable[[dict[str, Any], dict[str, str]], None]:
    def change(template: dict[str, Any], definitions: dict[str, str]) -> None:
        substitutions = template["Resources"][machine]["Properties"]["DefinitionSubstitutions"]
        if value is None:
            substitutions.pop("Partition", None)
        else:
            substitutions["Partition"] = value
    return change


def _parameter_pattern(template: dict[str, Any], definitions: dict[str, str]) -> None:
    template["Parameters"]["SelfTestTopicArn"] = {
        "Type": "String", "Default": "", "AllowedPattern": "^$|^arn:aws:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]+$"}


SELF_TEST_CASES: dict[str, tuple[Callable[[dict[str, Any], dict[str, str]], None], str | None]] = {
    # label: (change to the shipped template and definitions, the rule that must reject it,
    # or None: the check must pass)
    "a literal arn:aws:states:::lambda:invoke in a definition":
        (_acquire_resource("arn:aws:states:::lambda:invoke"), "partition-literal"),
    "a literal aws-us-gov integration in a definition":
        (_acquire_resource("arn:aws-us-gov:states:::lambda:invoke"), "partition-literal"),
    "another placeholder as a definition's partition":
        (_acquire_resource("arn:${LockName}:states:::lambda:invoke"), "partition-asl"),
    "a literal arn:aws: in a template !Sub":
        (_first_sub_arn(lambda node: {"Fn::Sub": node["Fn::Sub"].replace("arn:${AWS::Partition}:", "arn:aws:", 1)}),
         "partition-literal"),
    "${AWS::Partition} in a plain string (no !Sub)": (_first_sub_arn(lambda node: node["Fn::Sub"]), "partition-sub"),
    "an !Sub ARN with the definitions' ${Partition}":
        (_first_sub_arn(lambda node: {"Fn::Sub": node["Fn::Sub"].replace("${AWS::Partition}", "${Partition}", 1)}),
         "partition-sub"),
    "a state machine without the Partition substitution":
        (_substitution("LockedWorkflowStateMachine", None), "partition-substitution"),
    "Partition substituted with a literal aws": (_substitution("QueuedWorkflowStateMachine", "aws"), "partition-substitution"),
    "Partition substituted with the Region":
        (_substitution("AttachedWorkflowStateMachine", {"Ref": "AWS::Region"}), "partition-substitution"),
    "an AllowedPattern regex with arn:aws: (exempt)": (_parameter_pattern, None),
}


def self_test() -> int:
    template = load(ROOT / "template.yaml")
    definitions = read_definitions(ROOT / "statemachine")
    failures = 0
    shipped = problems(template, definitions)
    if shipped:
        failures += 1
        print(f"FAIL rejects the shipped template and definitions: {shipped[:3]}")
    else:
        print("ok   accepts the shipped template and definitions")
    for label, (change, rule) in SELF_TEST_CASES.items():
        mutated_template, mutated_definitions = copy.deepcopy(template), dict(definitions)
        change(mutated_template, mutated_definitions)
        found = problems(mutated_template, mutated_definitions)
        if rule is None and not found:
            print(f"ok   accepts {label}")
        elif rule is not None and any(problem.startswith(rule + ":") for problem in found):
            print(f"ok   rejects {label}: {next(p for p in found if p.startswith(rule + ':'))}")
        else:
            failures += 1
            print(f"FAIL {'rejected' if rule is None else f'{rule} did not reject'} {label}: {found[:3]}")
    print(f"partition self-test: {len(SELF_TEST_CASES) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    path = Path(argv[1] if len(argv) > 1 else "template.yaml")
    try:
        template = load(path)
    except TemplateError as error:
        print(f"{path}: {error}")
        return 1
    definitions = read_definitions(path.parent / "statemachine")
    found = problems(template, definitions)
    for problem in found:
        print(f"partition: {problem}")
    if found:
        print(f"partition: {len(found)} problem(s)")
        return 1
    print(f"partition: {path} and {len(definitions)} definitions: every ARN takes the stack's partition")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
