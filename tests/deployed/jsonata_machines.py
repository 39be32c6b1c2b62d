"""The JSONata flavour's machines on a deployed stack, for test_jsonata.py and
test_jsonata_variants.py.

The template deploys the JSONPath files only. A JSONata file is created
through CreateStateMachine with the values the template substituted into its
JSONPath twin: read back by matching the JSONPath file, its placeholders as
groups, against the deployed machine's definition (DescribeStateMachine),
with that machine's role. So the JSONata machine calls the same published
function versions, on the same lock and store. Where a scenario needs other
numbers, both flavours are created from their files with the same changed
values, on a lock of their own, and their outcomes compared."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from lockstate import poll

ROOT = Path(__file__).resolve().parents[2]
JSONPATH, JSONATA = ROOT / "statemachine", ROOT / "statemachine" / "jsonata"
PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def substituted_values(source: str, deployed: str) -> dict[str, str]:
    """The value of each ${Name} in `source` that turned it into `deployed`."""
    pattern, seen, at = [], set(), 0
    for m in PLACEHOLDER.finditer(source):
        pattern.append(re.escape(source[at:m.start()]))
        name = m.group(1)
        pattern.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
        seen.add(name)
        at = m.end()
    pattern.append(re.escape(source[at:]))
    match = re.fullmatch("".join(pattern), deployed, re.S)
    assert match, "the deployed definition is not its file with the placeholders substituted"
    return match.groupdict()


def create(sfn, path: Path, values: dict[str, str], role: str, label: str) -> str:
    text = PLACEHOLDER.sub(lambda m: values[m.group(1)], path.read_text())
    json.loads(text)  # every placeholder gave valid JSON
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    return sfn.create_state_machine(name=name, definition=text, roleArn=role)["stateMachineArn"]


def flavoured(sfn, machine_arn: str, kind: str) -> tuple[dict[str, str], str, str]:
    """(values, role, JSONata machine ARN) for the deployed JSONPath machine of `kind`."""
    described = sfn.describe_state_machine(stateMachineArn=machine_arn)
    values = substituted_values((JSONPATH / f"{kind}.asl.json").read_text(), described["definition"])
    return values, described["roleArn"], create(sfn, JSONATA / f"{kind}.asl.json", values,
                                                  described["roleArn"], f"jsonata-{kind}")


def start(sfn, machine, who, given):
    return sfn.start_execution(stateMachineArn=machine, name=f"{who}-{uuid.uuid4().hex[:8]}",
                               input=json.dumps(given))["executionArn"]


def ended(sfn, arn, timeout=120):
    return poll(f"{arn} ends", lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
                timeout=timeout)


def both_flavours(sfn, values, role, kind, label, **changes):
    """The two flavours of `kind` created with `values` and `changes`, each on a lock of its own:
    {flavour: (machine ARN, lock name)}."""
    lock_name = f"{label}-{uuid.uuid4().hex[:6]}"
    machines = {}
    for flavour, folder in (("jsonpath", JSONPATH), ("jsonata", JSONATA)):
        given = {**values, "LockName": f"{lock_name}-{flavour}", **changes}
        machines[flavour] = (create(sfn, folder / f"{kind}.asl.json", given, role, f"{label}-{flavour}"),
                             given["LockName"])
    return machines


def run_both(sfn, machines, given, while_running=None):
    """Start both flavours on `given` (then `while_running`); each one's DescribeExecution once ended."""
    started = {}
    for flavour, (machine, lock_name) in machines.items():
        started[flavour] = (start(sfn, machine, flavour, given), lock_name)
    if while_running:
        while_running(started)
    return {flavour: ended(sfn, arn) for flavour, (arn, _) in started.items()}
