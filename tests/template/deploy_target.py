"""`make deploy` installs only what deploying needs, hash-pinned (issue 14).

Why Python, not a tool: it reads the Makefile and deploy/requirements.txt, which no
CloudFormation or IAM tool looks at.

The environment that runs `sam deploy` holds AWS credentials; a test tool in it
(moto patches botocore, checkov and its ~150 dependencies) is code that has no
business there. So:

prerequisites   the deploy target depends on .venv-deploy alone, and its recipe
                runs nothing from the test venvs (.venv, .venv-lint, .venv-bench).
hash-pinned     .venv-deploy is installed with pip --require-hashes from
                deploy/requirements.txt, in which every requirement is pinned
                (==) with at least one --hash.
no-test-tools   deploy/requirements.txt names no test tool.

Usage: deploy_target.py [Makefile] | deploy_target.py --self-test
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TOOLS = {"moto", "checkov", "pytest", "hypothesis", "locust"}
TEST_VENVS = ("$(VENV)/", "$(LINT_VENV)", "$(BENCH_VENV)", ".venv/", ".venv-lint", ".venv-bench")


def _rule(makefile: str, target: str) -> tuple[str, list[str]] | None:
    """A rule's prerequisites and recipe lines."""
    match = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)*)", makefile, re.M)
    if not match:
        return None
    return match.group(1).strip(), [line.strip() for line in match.group(2).splitlines()]


def _requirements(text: str) -> list[tuple[str, str, int]]:
    """(name, pin, number of hashes) per requirement, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name = re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0].lower()
        pin = re.search(r"==\s*([^\s;]+)", line)
        found.append((name, pin.group(1) if pin else "", line.count("--hash=sha256:")))
    return found


def problems(makefile: str, requirements: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    deploy = _rule(makefile, "deploy")
    if deploy is None:
        return [("prerequisites", "no deploy target")]
    prerequisites, recipe = deploy
    if prerequisites != "$(DEPLOY_VENV)/.installed":
        found.append(("prerequisites", f"deploy depends on {prerequisites!r}, not $(DEPLOY_VENV)/.installed alone"))
    for line in recipe:
        if any(venv in line for venv in TEST_VENVS):
            found.append(("prerequisites", f"deploy's recipe uses a test venv: {line!r}"))
    install = _rule(makefile, "$(DEPLOY_VENV)/.installed")
    if install is None or not any("--require-hashes" in line and "deploy/requirements.txt" in line for line in install[1]):
        found.append(("hash-pinned", ".venv-deploy is not installed with --require-hashes from deploy/requirements.txt"))
    entries = _requirements(requirements)
    if not entries:
        found.append(("hash-pinned", "deploy/requirements.txt names nothing"))
    for name, pin, hashes in entries:
        if not pin or not hashes:
            found.append(("hash-pinned", f"{name} is not pinned with == and a --hash"))
        if name in TEST_TOOLS:
            found.append(("no-test-tools", f"deploy/requirements.txt installs the test tool {name}"))
    return found


GOOD_MAKEFILE = """deploy: $(DEPLOY_VENV)/.installed
\tPATH="$(CURDIR)/$(DEPLOY_VENV)/bin:$$PATH" $(DEPLOY_VENV)/bin/sam build
\t$(DEPLOY_VENV)/bin/sam deploy

$(DEPLOY_VENV)/.installed: deploy/requirements.txt
\tpython3 -m venv $(DEPLOY_VENV)
\t$(DEPLOY_VENV)/bin/pip install --require-hashes --no-deps -r deploy/requirements.txt
\ttouch $@
"""
GOOD_REQUIREMENTS = """aws-sam-cli==1.148.0 \\
    --hash=sha256:aa
    # via -r deploy/requirements.in
cargo-lambda==1.9.2 \\
    --hash=sha256:bb \\
    --hash=sha256:cc
"""
SELF_TEST_CASES = {
    "prerequisites": [
        ("deploy also installs the test venv", GOOD_MAKEFILE.replace(
            "deploy: $(DEPLOY_VENV)/.installed", "deploy: $(VENV)/.installed $(DEPLOY_VENV)/.installed"), GOOD_REQUIREMENTS),
        ("sam from the lint venv", GOOD_MAKEFILE.replace("$(DEPLOY_VENV)/bin/sam deploy", "$(LINT_VENV)/bin/sam deploy"),
         GOOD_REQUIREMENTS),
    ],
    "hash-pinned": [
        ("installed without --require-hashes", GOOD_MAKEFILE.replace("--require-hashes ", ""), GOOD_REQUIREMENTS),
        ("a requirement without a hash", GOOD_MAKEFILE, GOOD_REQUIREMENTS + "six==1.17.0\n"),
        ("a requirement not pinned", GOOD_MAKEFILE, GOOD_REQUIREMENTS + "six>=1 \\\n    --hash=sha256:dd\n"),
    ],
    "no-test-tools": [
        ("moto among them", GOOD_MAKEFILE, GOOD_REQUIREMENTS + "moto==5.1.0 \\\n    --hash=sha256:ee\n"),
    ],
}


def self_test() -> int:
    failures = 0
    good = problems(GOOD_MAKEFILE, GOOD_REQUIREMENTS)
    print(f"FAIL rejected the good files: {good}" if good else "ok   accepts the good files")
    failures += bool(good)
    for rule, cases in SELF_TEST_CASES.items():
        for label, makefile, requirements in cases:
            found = [message for found_rule, message in problems(makefile, requirements) if found_rule == rule]
            print(f"ok   {rule} rejects {label}: {found[0]}" if found else f"FAIL {rule} did not reject {label}")
            failures += not found
    total = 1 + sum(len(cases) for cases in SELF_TEST_CASES.values())
    print(f"deploy target self-test: {total - failures} of {total} as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    makefile = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "Makefile"
    found = problems(makefile.read_text(), (ROOT / "deploy/requirements.txt").read_text())
    for rule, message in found:
        print(f"deploy target: {rule}: {message}")
    if not found:
        print(f"deploy target: {makefile}: deploy installs only deploy/requirements.txt, hash-pinned")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
