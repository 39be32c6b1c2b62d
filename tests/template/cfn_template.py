"""Reading template.yaml for the static checks in this folder.

The template is CloudFormation YAML with short-form intrinsics (!Ref, !GetAtt,
!Sub, ...), which a plain YAML loader rejects. cfn-lint's decoder reads it into
plain dicts with the long forms ({"Ref": ...}, {"Fn::GetAtt": [...]}), and
cfn-lint's copy of the SAM translator expands AWS::Serverless::* resources
offline into the IAM roles and policies CloudFormation would really create.
Both come from the pinned cfn-lint in .venv-lint (tests/requirements-lint.txt).
"""

from __future__ import annotations

import copy
import logging
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
