"""The console's parameter form (issue 27): template.yaml's
Metadata.AWS::CloudFormation::Interface puts every parameter in exactly one
ParameterGroups entry, gives each a ParameterLabels label, and names no
parameter the template does not have. Without it the console lists the
parameters alphabetically, unlabelled; a parameter added without a group
would sit below every group, a group or label left on a removed parameter
fails the deploy.

Usage: parameter_interface.py [template.yaml] | parameter_interface.py --self-test
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cfn_template  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def problems(template: dict) -> list[str]:
    parameters = set(template.get("Parameters") or {})
    interface = ((template.get("Metadata") or {}).get("AWS::CloudFormation::Interface")) or {}
    if not interface:
        return ["no Metadata.AWS::CloudFormation::Interface"]
    found = []
    grouped: Counter[str] = Counter()
    for index, group in enumerate(interface.get("ParameterGroups") or []):
        label = ((group.get("Label") or {}).get("default") or "").strip()
        if not label:
            found.append(f"ParameterGroups[{index}] has no Label.default")
        members = group.get("Parameters") or []
        if not members:
            found.append(f"group {label or index!r} lists no parameter")
        grouped.update(members)
    labels = interface.get("ParameterLabels") or {}
    for name in sorted(parameters):
        if grouped[name] == 0:
            found.append(f"parameter {name} is in no ParameterGroups entry")
        elif grouped[name] > 1:
            found.append(f"parameter {name} is in {grouped[name]} ParameterGroups entries, not one")
        if not ((labels.get(name) or {}).get("default") or "").strip():
            found.append(f"parameter {name} has no ParameterLabels label")
    for name in sorted(set(grouped) - parameters):
        found.append(f"ParameterGroups name {name}, which is not a parameter")
    for name in sorted(set(labels) - parameters):
        found.append(f"ParameterLabels label {name}, which is not a parameter")
    return found


def self_test() -> int:
    good = {
        "Parameters": {"A": {}, "B": {}},
        "Metadata": {"AWS::CloudFormation::Interface": {
            "ParameterGroups": [{"Label": {"default": "One"}, "Parameters": ["A"]},
                                {"Label": {"default": "Two"}, "Parameters": ["B"]}],
            "ParameterLabels": {"A": {"default": "a"}, "B": {"default": "b"}}}},
    }

    def changed(edit):
        template = copy.deepcopy(good)
        edit(template)
        return template

    interface = lambda t: t["Metadata"]["AWS::CloudFormation::Interface"]  # noqa: E731
    cases = [
        ("no interface", changed(lambda t: t.pop("Metadata")), "no Metadata"),
        ("a parameter in no group", changed(lambda t: t["Parameters"].update(C={}) or
                                            interface(t)["ParameterLabels"].update(C={"default": "c"})),
         "C is in no ParameterGroups"),
        ("a parameter in two groups", changed(lambda t: interface(t)["ParameterGroups"][1]["Parameters"].append("A")),
         "A is in 2"),
        ("a parameter without a label", changed(lambda t: interface(t)["ParameterLabels"].pop("B")),
         "B has no ParameterLabels"),
        ("an empty label", changed(lambda t: interface(t)["ParameterLabels"].update(B={"default": " "})),
         "B has no ParameterLabels"),
        ("a group naming no parameter", changed(lambda t: interface(t)["ParameterGroups"][0]["Parameters"].append("Z")),
         "name Z, which is not"),
        ("a label of no parameter", changed(lambda t: interface(t)["ParameterLabels"].update(Z={"default": "z"})),
         "label Z, which is not"),
        ("a group without a label", changed(lambda t: interface(t)["ParameterGroups"][0].pop("Label")),
         "has no Label.default"),
    ]
    failures = 0
    found = problems(good)
    print(f"FAIL rejected the good template: {found}" if found else "ok   accepts the good template")
    failures += bool(found)
    for label, template, expected in cases:
        found = [p for p in problems(template) if expected in p]
        print(f"ok   rejects {label}: {found[0]}" if found else f"FAIL did not reject {label}: {problems(template)}")
        failures += not found
    print(f"parameter interface self-test: {len(cases) + 1 - failures} of {len(cases) + 1} as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    path = Path(sys.argv[1]) if sys.argv[1:] else ROOT / "template.yaml"
    template = cfn_template.load(path)
    found = problems(template)
    for problem in found:
        print(f"parameter interface: {problem}")
    if not found:
        groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        print(f"parameter interface: {len(template['Parameters'])} parameters, each in one of "
              f"{len(groups)} groups, each labelled")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
