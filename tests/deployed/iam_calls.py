"""The function calls iam_recorder.py wrote (SFN_LOCK_IAM_CALLS, IAM on):
which statements (Sids) a scenario reached, and any call not allowed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def calls() -> list[dict]:
    path = os.environ.get("SFN_LOCK_IAM_CALLS", "")
    if not path:
        pytest.skip("IAM evaluation off (SFN_LOCK_DEPLOYED_AUTH): no calls recorded")
    file = Path(path)
    return [json.loads(line) for line in file.read_text().splitlines() if line] if file.exists() else []


def sids(stack: str, function: str, action: str) -> set[str]:
    """The Sids that allowed `action` by the stack's `function` (logical id)."""
    prefix = f"/{stack}-{function}-"
    return {sid for c in calls() if c["action"] == action and prefix in c["principal"]
            and c["decision"] == "Allow" for sid in c["allowed_by"]}


def not_allowed() -> list[str]:
    """Every recorded call whose final decision is not Allow, one line each."""
    path = os.environ.get("SFN_LOCK_IAM_CALLS", "")
    if not path or not Path(path).exists():
        return []
    return [f"{c['principal']} {c['action']} {c['resource']}: {c['decision']}"
            for c in map(json.loads, Path(path).read_text().splitlines()) if c["decision"] != "Allow"]
