"""What the template checks know of the Rust code: contract/code-facts.json.

The file is written and kept true by two Rust tests (its "about" says which):
crates/sfn-lock/src/lambda/contract_facts.rs (settings, limits, metrics, environment)
and crates/sfn-lock/tests/suite/operations/ (the AWS operations each function
calls, per store, recorded at the wire). No check reads a .rs file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FACTS = Path("contract/code-facts.json")
SECTIONS = ("environment", "limits", "metrics", "operations", "sdk")


class FactsError(Exception):
    """The contract file is missing, or lacks what a check reads."""


def load(root: Path = ROOT) -> dict[str, Any]:
    path = root / FACTS
    try:
        facts = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise FactsError(f"cannot read {path}: {error}") from None
    missing = [section for section in SECTIONS if section not in facts]
    if missing:
        raise FactsError(f"{path} has no {missing}: rewrite it (see its 'about')")
    return facts


def get(facts: dict[str, Any], *keys: str) -> Any:
    """facts[k1][k2]...; FactsError naming the path when one is missing."""
    value: Any = facts
    for depth, key in enumerate(keys):
        if not isinstance(value, dict) or key not in value:
            raise FactsError(f"{FACTS} has no {'.'.join(keys[:depth + 1])}")
        value = value[key]
    return value
