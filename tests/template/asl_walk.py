"""Reading and walking the state machine definitions for the ASL checks in this folder.

Not a check: the pieces asl_flavours.py and asl_variants.py share, kept in one
place so that both read a definition, set its Comments aside and reach into its
nested state machines the same way (each had its own copy, and a fix to one,
such as a new placeholder form, would have missed the other). parameter_orderings.py
(and through it timing_relations.py) reads definitions with loads too. Not here:
parameter_orderings.all_states, which flattens every state, nested or not, into one
dict by name, and retry_bounds.load, which reads each placeholder as the number 1.

- load/loads: a definition, its unquoted ${...} placeholders (DefinitionSubstitutions
  that stand for a bare JSON value, e.g. "TimeoutSeconds": ${WorkloadTimeoutSeconds})
  turned into the strings "${...}" so that the file is JSON;
- without_comments: a definition (or any part of one) with every Comment dropped;
- machines: the state machine and each nested one, recursively into Parallel
  branches and Map processors, named by where it sits;
- workload_branch: the states of Run Workload Under Lock's branch, where the
  self-tests plant most of their drifts.

The scripts import it by name: run by path, as tests/template/check.sh runs them,
Python puts this folder first on sys.path, and they insert it too (as the other
checks here do) so that an import from elsewhere finds it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

_PLACEHOLDER = re.compile(r"(:\s*)(\$\{\w+\})(\s*[,\n}])")


def loads(text: str) -> dict:
    """A definition's text as data, its unquoted ${...} placeholders turned into strings."""
    return json.loads(_PLACEHOLDER.sub(r'\1"\2"\3', text))


def load(path: Path) -> dict:
    """A definition, its unquoted ${...} placeholders turned into strings."""
    return loads(path.read_text())


def without_comments(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_comments(v) for k, v in value.items() if k != "Comment"}
    if isinstance(value, list):
        return [without_comments(v) for v in value]
    return value


def machines(definition: dict) -> Iterator[tuple[str, dict]]:
    """The state machine ("") and each nested one ("<state>/branch <i>", "<state>/processor",
    and deeper: "<state>/branch 0<inner state>/processor"), each with its StartAt and States."""
    yield "", definition
    for name, state in definition.get("States", {}).items():
        for i, branch in enumerate(state.get("Branches", [])):
            for sub, machine in machines(branch):
                yield f"{name}/branch {i}{sub}", machine
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            for sub, machine in machines(processor):
                yield f"{name}/processor{sub}", machine


def workload_branch(definition: dict) -> dict:
    """The states of the workload's branch (the one branch of Run Workload Under Lock)."""
    return definition["States"]["Run Workload Under Lock"]["Branches"][0]["States"]
