"""IAM hand mutations of the deployed tier (issue 26, "IAM for real"):
for each statement of each Lambda function's role policies in template.yaml,
deploy a copy without that one statement into ministack with IAM on and run
the scenarios; a removal no scenario notices is a statement no scenario needs
(or one the emulator does not evaluate). `make deployed-iam-mutants`; slow
(a fresh emulator and the tier per mutant), not part of `make test`.

    python tests/deployed/iam_mutants.py [SUBSTRING ...]   (only matching mutants)

Each mutant runs `scripts/deployed-stack.sh` with SFN_LOCK_DEPLOYED_AUTH=true
(so the functions run under their roles and every call is recorded) and
pytest with this file as a plugin (-p iam_mutants): with SFN_LOCK_IAM_MUTANT
set, it wraps deploy.load_template so that the template package() reads
lacks the statement. template.yaml itself is never written: the removal
lives in the packaged copy only.

A statement under a condition no scenario deploys (LockStore ssm, a
TargetStateMachineArn, LockedStateMachineArns) is listed as not deployed,
not run. The report goes to stdout and target/deployed-stack/iam-mutants.md.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import deploy  # noqa: E402

ROOT = deploy.ROOT
# Which deployed stacks (tests/deployed/conftest.py) satisfy a condition, and
# the pytest selection that deploys them: a statement under UseS3Store cannot
# change a DynamoDB stack, so its mutant runs the S3 scenarios only.
CONDITIONS = {
    None: ("every stack", None),
    "UseDynamoDbStore": ("sfn-lock, sfn-lock-sweep", "not s3"),
    "UseS3Store": ("sfn-lock-s3", "s3"),
}


def statements(template: dict):
    """(function, policy index, statement index, Sid, condition) of every
    statement of every function's Policies, conditional ones included."""
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for i, policy in enumerate(resource["Properties"].get("Policies") or []):
            condition = None
            if isinstance(policy, dict) and "Fn::If" in policy:
                condition, policy = policy["Fn::If"][0], policy["Fn::If"][1]
            if not isinstance(policy, dict) or "Statement" not in policy:
                continue  # a managed policy by name: not a statement of the template's
            for j, stmt in enumerate(policy["Statement"]):
                inner = condition
                if "Fn::If" in stmt:
                    inner, stmt = stmt["Fn::If"][0], stmt["Fn::If"][1]
                yield name, i, j, stmt.get("Sid", f"#{j}"), inner


def remove(template: dict, function: str, i: int, j: int) -> dict:
    out = copy.deepcopy(template)
    policy = out["Resources"][function]["Properties"]["Policies"][i]
    doc = policy["Fn::If"][1] if "Fn::If" in policy else policy
    del doc["Statement"][j]
    return out


# ------------------------------------------------------ the pytest plugin
def pytest_configure(config):
    mutant = os.environ.get("SFN_LOCK_IAM_MUTANT")
    if not mutant:
        return
    function, i, j = mutant.split("/")
    load = deploy.load_template

    def load_mutated(path=deploy.TEMPLATE):
        template = load(path)
        return remove(template, function, int(i), int(j)) if Path(path) == deploy.TEMPLATE else template

    deploy.load_template = load_mutated


# ------------------------------------------------------------- the driver
def run_mutant(function, i, j, selection):
    env = {**os.environ, "SFN_LOCK_DEPLOYED_AUTH": "true", "SFN_LOCK_IAM_MUTANT": f"{function}/{i}/{j}",
           "PYTHONPATH": str(Path(__file__).parent)}
    cmd = [str(ROOT / "scripts/deployed-stack.sh"), str(ROOT / ".venv-ministack/bin/python"), "-m", "pytest",
           "-p", "no:cacheprovider", "-p", "iam_mutants", "-x", "-q", "tests/deployed"]
    if selection:
        cmd += ["-k", selection]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    logs = re.search(r"\(logs in (\S+)\)", proc.stderr)
    denied = set()
    if logs and Path(logs.group(1), "iam-calls.jsonl").is_file():
        for line in Path(logs.group(1), "iam-calls.jsonl").read_text().splitlines():
            call = json.loads(line)
            if call["decision"] != "Allow" and function in call["principal"]:
                denied.add(call["action"])
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, re.M)
    return proc.returncode, failed, sorted(denied), seconds, proc


def main(argv):
    wanted = argv[1:]
    rows = []
    for function, i, j, sid, condition in statements(deploy.load_template()):
        label = f"{function} {sid}"
        if wanted and not any(w in label for w in wanted):
            continue
        if condition not in CONDITIONS:
            rows.append((function, sid, condition, "not deployed by any scenario", "", "", ""))
            continue
        stacks, selection = CONDITIONS[condition]
        print(f"iam-mutants: {label} removed ({stacks}) ...", file=sys.stderr, flush=True)
        code, failed, denied, seconds, proc = run_mutant(function, i, j, selection)
        if code == 0:
            verdict = "SURVIVED"
        elif code == 1:
            verdict = "killed"
        else:  # not a test failure: the run itself broke
            verdict = f"error (exit {code})"
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        print(f"iam-mutants:   {verdict} in {seconds:.0f} s {failed} denied {denied}", file=sys.stderr, flush=True)
        rows.append((function, sid, condition or "-", verdict, ", ".join(f.split("::")[-1] for f in failed),
                     ", ".join(denied), f"{seconds:.0f}"))
    table = ["| function | statement (Sid) | condition | removed: | failing test | calls denied | s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    table += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    report = "\n".join(table) + "\n"
    print(report)
    out = ROOT / "target" / "deployed-stack" / "iam-mutants.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    return 1 if any(r[3].startswith("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
