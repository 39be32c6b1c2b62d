"""The state machines call a published version of each lock function (issue 14).

The rules that read the template's text alone are cfn-guard rules
(guard/function_versions.guard: versioned, machines-call-versions,
invoke-every-version). These two stay here because no tool sees them:
settings-publish compares the Environment with the VersionDescription's !Sub
variables and evaluates a parameter's AllowedPattern against a text (Guard has
no regex over a value taken from the template), and transformed reads the
template after the SAM transform (cfn-lint's translator), which cfn-guard and
cfn-lint's rules never see as a whole.

A state machine that calls a function's unqualified ARN runs whatever code and
settings the function has at the moment of each call: a stack update while an
execution waits would change its acquire or release mid-flight. So:

settings-publish        the VersionDescription changes exactly when the Environment
                        does. SAM publishes a new version only when the function's
                        template text changes, not when a parameter's value does (it
                        does not resolve the Environment); a version's settings are
                        frozen, so without this MaxLeaseSeconds or LockStore changed
                        in an update would never reach the state machines. A changed
                        Description replaces the version (Update requires:
                        Replacement), and Lambda publishes only if the settings
                        changed too: a Description that changes alone fails the
                        update ("version already exists"). So it is a !Sub whose
                        variables are the Environment's own variables, each with the
                        same value, but for the values fixed for a stack's life
                        (STACK_CONSTANT: built from the stack's name and its store's
                        resources, and from LockStore, which the text names), and
                        it names nothing else. A variable that a !If leaves unset
                        (AWS::NoValue, as MAX_LEASE_SECONDS without MaxLeaseSeconds)
                        is shown with a text in that branch instead, one that the
                        other branch's parameter can never take (its AllowedPattern
                        refuses it), so that setting or clearing it changes the text.
transformed             after the SAM transform each lock function has one
                        AWS::Lambda::Version with DeletionPolicy and
                        UpdateReplacePolicy Retain, its Description the
                        VersionDescription.

Usage: function_versions.py template.yaml | function_versions.py --self-test
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, load, transform  # noqa: E402

LOCK_FUNCTIONS = {"AcquireLockFunctionArn": "AcquireLockFunction", "ReleaseLockFunctionArn": "ReleaseLockFunction"}
STATE_MACHINE = "AWS::Serverless::StateMachine"


def _resources(template: dict) -> dict[str, dict]:
    return template.get("Resources", {}) or {}


# Environment variables whose value is fixed for a stack's life: built from its
# name and its store's resources (never replaced while executions run:
# docs/upgrading.md); which store they name is LockStore, which the description names.
STACK_CONSTANT = {"LOCK_STORE_URL", "LOCK_TABLE_NAME", "METRICS_NAMESPACE"}
STORE_PARAMETER = "LockStore"


NO_VALUE = {"Ref": "AWS::NoValue"}


def _shown_as(template: dict, value: Any, shown: Any) -> str | None:
    """Why the VersionDescription's `shown` does not show the Environment's `value`
    (None: it does). Equal, or the same !If with an unset (AWS::NoValue) branch shown
    as a text that the other branch, a !Ref of a parameter, can never be."""
    if shown == value:
        return None
    if not (isinstance(value, dict) and list(value) == ["Fn::If"] and isinstance(shown, dict)
            and list(shown) == ["Fn::If"] and len(value["Fn::If"]) == len(shown["Fn::If"]) == 3
            and shown["Fn::If"][0] == value["Fn::If"][0]):
        return "not as the Environment has it"
    for unset, other in ((1, 2), (2, 1)):
        if value["Fn::If"][unset] != NO_VALUE or shown["Fn::If"][other] != value["Fn::If"][other]:
            continue
        text, given = shown["Fn::If"][unset], value["Fn::If"][other]
        parameter = (template.get("Parameters", {}) or {}).get(given.get("Ref")) if isinstance(given, dict) else None
        pattern = (parameter or {}).get("AllowedPattern")
        if not isinstance(text, str) or not text:
            return f"its unset branch as {text!r}, not a text"
        if pattern is None:
            return f"its unset branch as {text!r}, which {given!r} may also be (no AllowedPattern to tell)"
        if re.fullmatch(pattern, text):
            return f"its unset branch as {text!r}, which {given['Ref']} may also be: setting it to that publishes no version"
        return None
    return "not as the Environment has it"


def settings_publish(template: dict) -> list[str]:
    found = []
    for function in LOCK_FUNCTIONS.values():
        properties = _resources(template).get(function, {}).get("Properties", {}) or {}
        environment = (properties.get("Environment", {}) or {}).get("Variables", {}) or {}
        description = properties.get("VersionDescription")
        sub = description.get("Fn::Sub") if isinstance(description, dict) else None
        if not (isinstance(sub, list) and len(sub) == 2 and isinstance(sub[0], str) and isinstance(sub[1], dict)):
            found.append(f"{function}'s VersionDescription is not a !Sub [text, variables]")
            continue
        text, variables = sub
        used = set(re.findall(r"\$\{([^}!]+)\}", text))
        for name, value in environment.items():
            if name in STACK_CONSTANT:
                continue
            why = _shown_as(template, value, variables.get(name)) if name in variables else "not at all"
            if why is None and name not in used:
                why = "not in its text"
            if why is not None:
                found.append(f"{function}'s VersionDescription shows {name} {why}: "
                             "a change of it would publish no version, and the state machines would keep the old one")
        if STORE_PARAMETER not in used:
            found.append(f"{function}'s VersionDescription does not name {STORE_PARAMETER}: a store switch "
                         "would publish no version")
        extra = (used - set(variables) - {STORE_PARAMETER}) | {n for n in variables if n not in environment}
        if extra:
            found.append(f"{function}'s VersionDescription also names {', '.join(sorted(extra))}, which the "
                         "Environment does not show: changed alone, the update fails (\"version already exists\")")
    return found


def _versions(resources: dict, function: str) -> dict[str, dict]:
    return {n: r for n, r in resources.items()
            if r.get("Type") == "AWS::Lambda::Version"
            and (r.get("Properties", {}) or {}).get("FunctionName") == {"Ref": function}}


def transformed(template: dict) -> list[str]:
    try:
        resources = transform(template).get("Resources", {})
    except TemplateError as error:
        return [f"SAM transform failed: {error}"]
    found = []
    for function in LOCK_FUNCTIONS.values():
        versions = _versions(resources, function)
        if len(versions) != 1:
            found.append(f"{function}: {len(versions)} AWS::Lambda::Version resources after the transform, not 1")
            continue
        (name, version), = versions.items()
        for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
            if version.get(policy) != "Retain":
                found.append(f"{name}: {policy} {version.get(policy)!r}, not Retain")
        wanted = (_resources(template).get(function, {}).get("Properties", {}) or {}).get("VersionDescription")
        if version.get("Properties", {}).get("Description") != wanted:
            found.append(f"{name}: Description {version.get('Properties', {}).get('Description')!r}, not the VersionDescription")
        # A property outside the code, Environment and MemorySize: its change must publish.
        changed = copy.deepcopy(template)
        properties = changed["Resources"][function].setdefault("Properties", {})
        properties["Timeout"] = int(properties.get("Timeout", 3)) + 1
        try:
            after = _versions(transform(changed).get("Resources", {}), function)
        except TemplateError as error:
            found.append(f"SAM transform failed: {error}")
            continue
        if set(after) == set(versions):
            found.append(f"{function}: a changed Timeout keeps the version {name}: the state machines would "
                         "keep the old timeout")
    return found


RULES: dict[str, Callable[[dict], list[str]]] = {
    "settings-publish": settings_publish,
    "transformed": transformed,
}


def problems(template: dict) -> list[tuple[str, str]]:
    return [(rule, message) for rule, check in RULES.items() for message in check(template)]


# -- self-test --------------------------------------------------------------------------
def _function(environment: dict, description: dict) -> dict:
    return {
        "Type": "AWS::Serverless::Function",
        "UpdateReplacePolicy": "Retain",
        "Properties": {
            "Runtime": "provided.al2023", "Handler": "bootstrap", "CodeUri": "s3://bucket/key", "Timeout": 10,
            "AutoPublishAlias": "live", "AutoPublishAliasAllProperties": True,
            "VersionDescription": description,
            "Environment": {"Variables": environment},
        },
    }


_STORE = {"Fn::Sub": "dynamodb://${Table}"}
# As template.yaml: unset when MaxLease is empty, shown then as "none" (which its
# AllowedPattern refuses); and a setting built from two parameters.
_MAX = {"Fn::If": ["HasCap", {"Ref": "MaxLease"}, {"Ref": "AWS::NoValue"}]}
_MAX_SHOWN = {"Fn::If": ["HasCap", {"Ref": "MaxLease"}, "none"]}
_SUM = {"Fn::Sub": "${A}+${B}"}
GOOD: dict[str, Any] = {
    "Parameters": {"MaxLease": {"Type": "String", "Default": "", "AllowedPattern": "^$|^[1-9][0-9]{0,7}$"},
                   "A": {"Type": "Number", "Default": 1},
                   "B": {"Type": "Number", "Default": 2}, "LockStore": {"Type": "String", "Default": "dynamodb"}},
    "Conditions": {"HasCap": {"Fn::Not": [{"Fn::Equals": [{"Ref": "MaxLease"}, ""]}]}},
    "Resources": {
        "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        "AcquireLockFunction": _function({"LOCK_STORE_URL": _STORE, "MAX_LEASE_SECONDS": _MAX, "SUM": _SUM},
                                         {"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}, sum ${SUM}",
                                                      {"MAX_LEASE_SECONDS": _MAX_SHOWN, "SUM": _SUM}]}),
        "ReleaseLockFunction": _function({"LOCK_STORE_URL": _STORE}, {"Fn::Sub": ["store ${LockStore}", {}]}),
        "Machine": {"Type": STATE_MACHINE, "Properties": {
            "DefinitionUri": "s3://bucket/machine.json",
            "DefinitionSubstitutions": {"AcquireLockFunctionArn": {"Ref": "AcquireLockFunction.Version"},
                                        "ReleaseLockFunctionArn": {"Ref": "ReleaseLockFunction.Version"}},
            "Policies": [{"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "lambda:InvokeFunction",
                "Resource": [{"Fn::Sub": "${AcquireLockFunction.Arn}:*"}, {"Fn::Sub": "${ReleaseLockFunction.Arn}:*"}]}]}],
        }},
    },
}


def _broken(change: Callable[[dict], None]) -> dict:
    template = copy.deepcopy(GOOD)
    change(template)
    return template


def _acquire(template: dict) -> dict:
    return template["Resources"]["AcquireLockFunction"]


SELF_TEST_CASES: dict[str, list[tuple[str, dict]]] = {
    "settings-publish": [
        ("a setting of the environment left out", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}",
                                            {"MAX_LEASE_SECONDS": _MAX_SHOWN}]}))),
        ("a setting in the variables but not in the text", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}",
                                            {"MAX_LEASE_SECONDS": _MAX_SHOWN, "SUM": _SUM}]}))),
        ("the terms of a sum, which change nothing alone", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}, sum ${SUM} (${A}+${B})",
                                            {"MAX_LEASE_SECONDS": _MAX_SHOWN, "SUM": _SUM}]}))),
        ("the unset cap shown as 900, which a set cap may be", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}, sum ${SUM}",
                                            {"MAX_LEASE_SECONDS": {"Fn::If": ["HasCap", {"Ref": "MaxLease"}, "900"]},
                                             "SUM": _SUM}]}))),
        ("the unset cap shown on the wrong branch", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}, sum ${SUM}",
                                            {"MAX_LEASE_SECONDS": {"Fn::If": ["HasCap", "none", {"Ref": "MaxLease"}]},
                                             "SUM": _SUM}]}))),
        ("the cap shown under another condition", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["store ${LockStore}, max ${MAX_LEASE_SECONDS}, sum ${SUM}",
                                            {"MAX_LEASE_SECONDS": {"Fn::If": ["Other", {"Ref": "MaxLease"}, "none"]},
                                             "SUM": _SUM}]}))),
        ("no LockStore", _broken(lambda t: _acquire(t)["Properties"].update(
            VersionDescription={"Fn::Sub": ["max ${MAX_LEASE_SECONDS}, sum ${SUM}",
                                            {"MAX_LEASE_SECONDS": _MAX_SHOWN, "SUM": _SUM}]}))),
        ("no VersionDescription", _broken(lambda t: _acquire(t)["Properties"].pop("VersionDescription"))),
    ],
    "transformed": [
        ("a DeletionPolicy Delete passed on to the version", _broken(lambda t: _acquire(t).update(DeletionPolicy="Delete"))),
        ("a version that ignores a changed Timeout", _broken(
            lambda t: _acquire(t)["Properties"].update(AutoPublishAliasAllProperties=False))),
    ],
}


def self_test() -> int:
    failures = 0
    good = problems(GOOD)
    if good:
        failures += 1
        print(f"FAIL rejected the good template: {good}")
    else:
        print("ok   accepts the good template")
    for rule, cases in SELF_TEST_CASES.items():
        for label, template in cases:
            found = [message for found_rule, message in problems(template) if found_rule == rule]
            if found:
                print(f"ok   {rule} rejects {label}: {found[0]}")
            else:
                failures += 1
                print(f"FAIL {rule} did not reject {label}")
    for rule in sorted(set(RULES) - set(SELF_TEST_CASES)):
        failures += 1
        print(f"FAIL {rule} has no self-test case")
    total = 1 + sum(len(cases) for cases in SELF_TEST_CASES.values())
    print(f"function versions self-test: {total - failures} of {total} as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    path = Path(sys.argv[1])
    found = problems(load(path))
    for rule, message in found:
        print(f"function versions: {rule}: {message}")
    if not found:
        print(f"function versions: {path}: {len(RULES)} rules hold")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
