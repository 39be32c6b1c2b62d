"""Reading template.yaml for the static checks in this folder.

Not a check: the loader the checks share (cfn-lint's decoder and SAM translator).

The template is CloudFormation YAML with short-form intrinsics (!Ref, !GetAtt,
!Sub, ...), which a plain YAML loader rejects. cfn-lint's decoder reads it into
plain dicts with the long forms ({"Ref": ...}, {"Fn::GetAtt": [...]}), and
cfn-lint's copy of the SAM translator expands AWS::Serverless::* resources
offline into the IAM roles and policies CloudFormation would really create.
Both come from the pinned cfn-lint in .venv-lint (tests/requirements-lint.txt).
"""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

from cfnlint.decode import decode
from cfnlint.template.transforms._sam import Transform as SamTransform

logging.getLogger("cfnlint").setLevel(logging.ERROR)
logging.getLogger("samtranslator").setLevel(logging.ERROR)


class TemplateError(Exception):
    """The template could not be read or transformed."""


def load(path: Path) -> dict[str, Any]:
    """The template as plain data (long-form intrinsics)."""
    template, matches = decode(str(path))
    if matches or template is None:
        raise TemplateError("; ".join(str(m) for m in matches) or f"cannot read {path}")
    return _plain(template)


def transform(template: dict[str, Any], filename: str = "template.yaml") -> dict[str, Any]:
    """The template after the SAM transform, as CloudFormation would see it."""
    sam = SamTransform(filename, copy.deepcopy(template), "us-east-1")
    matches = sam.transform_template()
    if matches:
        raise TemplateError("; ".join(m.message for m in matches))
    return _plain(sam.template())


def _plain(value: Any) -> Any:
    """cfn-lint's node classes carry line marks; tests only need dicts, lists and scalars."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def intrinsic(value: Any) -> tuple[str, Any] | None:
    """("Ref", arg) / ("Fn::GetAtt", arg) / ... for an intrinsic function, else None."""
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref" or key.startswith("Fn::") or key == "Condition":
            return key, arg
    return None


def as_text(value: Any) -> str:
    """A value as the text it becomes, with ${...} for what CloudFormation fills in:
    ${Name} for !Ref, ${Name.Attribute} for !GetAtt, a !Sub's own text; anything
    else as JSON."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    fn = intrinsic(value)
    if fn and fn[0] == "Ref":
        return f"${{{fn[1]}}}"
    if fn and fn[0] == "Fn::GetAtt":
        name, attribute = fn[1].split(".", 1) if isinstance(fn[1], str) else fn[1]
        return f"${{{name}.{attribute}}}"
    if fn and fn[0] == "Fn::Sub" and isinstance(fn[1], str):
        return fn[1]
    return json.dumps(value, sort_keys=True)


# -- the template for given parameter values ----------------------------------------------
def condition_values(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, bool]:
    """The Conditions that `parameters` decide (Fn::Equals of a Ref to one of them and a
    literal, Fn::Not/And/Or/Condition of decided ones); the others are left out."""
    conditions = template.get("Conditions", {}) or {}

    def value(expression: Any) -> str | None:
        if isinstance(expression, (str, int, float)) and not isinstance(expression, bool):
            return str(expression)
        fn = intrinsic(expression)
        if fn and fn[0] == "Ref" and fn[1] in parameters:
            return str(parameters[fn[1]])
        return None

    def holds(expression: Any, seen: tuple[str, ...]) -> bool | None:
        fn = intrinsic(expression)
        if fn is None:
            return None
        key, arg = fn
        if key == "Condition":
            if arg in seen or arg not in conditions:
                raise TemplateError(f"condition {arg}: {'a cycle' if arg in seen else 'not in Conditions'}")
            return holds(conditions[arg], seen + (arg,))
        if key == "Fn::Equals":
            left, right = value(arg[0]), value(arg[1])
            return None if left is None or right is None else left == right
        if key == "Fn::Not":
            inner = holds(arg[0], seen)
            return None if inner is None else not inner
        if key in ("Fn::And", "Fn::Or"):
            found = [holds(part, seen) for part in arg]
            decisive = key == "Fn::Or"  # Or: any True decides; And: any False decides
            if decisive in found:
                return decisive
            return None if None in found else not decisive
        return None

    decided = {}
    for name, expression in conditions.items():
        result = holds(expression, (name,))
        if result is not None:
            decided[name] = result
    return decided


_REMOVED = object()


def specialize(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """The template as CloudFormation deploys it with these parameter values, as far
    as they decide: the resources and outputs whose Condition they make false are
    gone, each Fn::If on a condition they decide is its branch (AWS::NoValue: the
    key or list item is gone). Conditions they do not decide stay as written, and
    so do the Refs to the parameters. TemplateError if what is left still refers to
    a resource that is gone (cfn-lint reports that too, but per template, not per
    parameter value)."""
    decided = condition_values(template, parameters)

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            fn = intrinsic(value)
            if fn and fn[0] == "Fn::If" and isinstance(fn[1], list) and fn[1][0] in decided:
                return walk(fn[1][1] if decided[fn[1][0]] else fn[1][2])
            if fn and fn[0] == "Fn::If" and isinstance(fn[1], list):  # undecided: both branches stay
                branches = [walk(branch) for branch in fn[1][1:]]
                return {"Fn::If": [fn[1][0]] + [{"Ref": "AWS::NoValue"} if branch is _REMOVED else branch
                                                 for branch in branches]}
            if fn == ("Ref", "AWS::NoValue"):
                return _REMOVED
            walked = {key: walk(item) for key, item in value.items()}
            return {key: item for key, item in walked.items() if item is not _REMOVED}
        if isinstance(value, list):
            return [item for item in (walk(item) for item in value) if item is not _REMOVED]
        return value

    result = copy.deepcopy(template)
    gone: set[str] = set()
    for section in ("Resources", "Outputs"):
        entries = result.get(section, {}) or {}
        for name in list(entries):
            condition = (entries[name] or {}).get("Condition")
            if condition in decided and not decided[condition]:
                del entries[name]
                if section == "Resources":
                    gone.add(name)
    result = walk(result)
    for name in (result.get("Resources", {}) or {}):
        dangling = references(result["Resources"][name], gone)
        if dangling:
            raise TemplateError(f"with {parameters}, {name} refers to {sorted(dangling)}, which that deploys without")
    for name in (result.get("Outputs", {}) or {}):
        dangling = references(result["Outputs"][name], gone)
        if dangling:
            raise TemplateError(f"with {parameters}, output {name} refers to {sorted(dangling)}, which that "
                                "deploys without")
    return result


def references(value: Any, names: set[str]) -> set[str]:
    """Which of `names` `value` refers to: Ref, Fn::GetAtt, ${Name} or ${Name.Attr}
    in Fn::Sub, DependsOn."""
    found: set[str] = set()
    if isinstance(value, dict):
        fn = intrinsic(value)
        if fn and fn[0] == "Ref" and fn[1] in names:
            found.add(fn[1])
        elif fn and fn[0] == "Fn::GetAtt":
            target = (fn[1].split(".", 1)[0] if isinstance(fn[1], str) else fn[1][0])
            if target in names:
                found.add(target)
        elif fn and fn[0] == "Fn::Sub":
            text, variables = (fn[1], {}) if isinstance(fn[1], str) else (fn[1][0], fn[1][1] or {})
            for variable in re.findall(r"\$\{([^}!][^}]*)\}", str(text)):
                target = variable.split(".", 1)[0]
                if target in names and variable not in variables:
                    found.add(target)
            found |= references(variables, names)
            return found
        for key, item in value.items():
            if key == "DependsOn":
                found |= {name for name in ([item] if isinstance(item, str) else item) if name in names}
            else:
                found |= references(item, names)
    elif isinstance(value, list):
        for item in value:
            found |= references(item, names)
    return found
