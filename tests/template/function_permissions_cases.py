"""function_permissions.py --self-test: each rule seen to report a broken template,
or broken facts (contract/code-facts.json as the code would say it), against the
shipped ones. The facts' cases stand for the Rust edits the check used to parse:
a new call in a store method is a new recorded operation."""

from __future__ import annotations

import copy
from typing import Any, Callable

from cfn_template import TemplateError, specialize, transform
from iam_grants import _as_list
from code_facts import FactsError
from function_permissions import (ACQUIRE, RELEASE, STORE_PARAMETER, SWEEP, TABLE, TABLE_ENV, Facts,
                                  all_problems, problems)


def _statements(template: dict, function: str) -> list:
    return template["Resources"][function]["Properties"]["Policies"][0]["Statement"]


def _with_action(template: dict, function: str, action: str) -> dict:
    """The one unconditional statement of `function` whose only action is `action`."""
    found = [s for s in _statements(template, function)
             if isinstance(s, dict) and "Fn::If" not in s and _as_list(s.get("Action")) == [action]]
    if len(found) != 1:
        raise AssertionError(f"self-test: {len(found)} statements of {function} allow just {action}; update the case")
    return found[0]


def _drop(function: str, action: str) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        _statements(template, function).remove(_with_action(template, function, action))
    return change


def _conditional(function: str, action: str) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        statements = _statements(template, function)
        statement = _with_action(template, function, action)
        statements[statements.index(statement)] = {"Fn::If": ["HasSchedule", statement, {"Ref": "AWS::NoValue"}]}
    return change


def _add(function: str, statement: dict) -> Callable[[dict], None]:
    return lambda template: _statements(template, function).append(statement)


def _policy(function: str, policy: Any) -> Callable[[dict], None]:
    return lambda template: template["Resources"][function]["Properties"]["Policies"].append(policy)


def _calls(function: str, store: str, operation: str) -> Callable[[Facts], None]:
    """The code of `function` calling `operation` on `store` (as the operations test
    would record it)."""
    binary = {ACQUIRE: "acquire-lock", RELEASE: "release-lock", SWEEP: "release-execution-locks"}[function]
    return lambda facts: facts["operations"][binary][store].append(operation)


def _apply(template: dict, facts: Facts, changes: list) -> tuple[dict, Facts]:
    template, facts = copy.deepcopy(template), copy.deepcopy(facts)
    for change in changes:
        change(facts) if getattr(change, "on_facts", False) else change(template)
    return template, facts


def _facts(change: Callable[[Facts], None]) -> Callable[[Facts], None]:
    change.on_facts = True  # type: ignore[attr-defined]
    return change


INDEX_ARN = {"Fn::Sub": "${LockTable.Arn}/index/owner-index"}


def _store_statements(template: dict, function: str, condition: str) -> list:
    """The statements of `function`'s policy under !If [condition, ...] (the raw template)."""
    for policy in template["Resources"][function]["Properties"]["Policies"]:
        branch = policy.get("Fn::If") if isinstance(policy, dict) else None
        if branch and branch[0] == condition:
            return branch[1]["Statement"]
    raise AssertionError(f"self-test: no policy of {function} under {condition}; update the case")


def _store_statement(function: str, condition: str, sid: str) -> Callable[[dict], dict]:
    def find(template: dict) -> dict:
        found = [s for s in _store_statements(template, function, condition) if s.get("Sid") == sid]
        if len(found) != 1:
            raise AssertionError(f"self-test: {len(found)} statements {sid} of {function}; update the case")
        return found[0]
    return find



def self_test(raw: dict, facts: Facts) -> int:
    failures = 0
    # The DynamoDB cases: the template as LockStore dynamodb (the default) deploys it.
    template = specialize(raw, {STORE_PARAMETER: "dynamodb"})

    def expect(ok: bool, label: str, detail: Any = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}{': ' + str(detail) if detail != '' else ''}")

    try:
        shipped_expanded = transform(template)
        shipped = problems(template, facts, shipped_expanded)
        expect(True, "reads the shipped template and facts", f"{len(shipped)} problem(s) there")
    except (FactsError, TemplateError) as error:
        expect(False, "reads the shipped template and facts", error)
        return 1

    def query_on_table(t: dict) -> None:
        statement = _with_action(t, SWEEP, "dynamodb:Query")
        if statement.get("Resource") != INDEX_ARN:
            raise AssertionError("self-test: the sweep's Query is not on the owner index; update the case")
        statement["Resource"] = {"Fn::GetAtt": [TABLE, "Arn"]}

    # Each case: (label, changes, rule, words its new problem must contain).
    cases: list[tuple[str, list, str, tuple[str, ...]]] = [
        ("acquire's PutItem removed from its policy", [_drop(ACQUIRE, "dynamodb:PutItem")],
         "missing", (ACQUIRE, "dynamodb:PutItem")),
        ("acquire's PutItem only under a condition", [_conditional(ACQUIRE, "dynamodb:PutItem")],
         "missing", (ACQUIRE, "dynamodb:PutItem", "only under a condition")),
        ("release's DeleteItem removed", [_drop(RELEASE, "dynamodb:DeleteItem")],
         "missing", (RELEASE, "dynamodb:DeleteItem")),
        ("the sweep's GetItem removed", [_drop(SWEEP, "dynamodb:GetItem")],
         "missing", (SWEEP, "dynamodb:GetItem")),
        ("the sweep's Query on the table ARN, not the index", [query_on_table],
         "missing", (SWEEP, "dynamodb:Query", "/index/owner-index")),
        ("the sweep's Query on the table ARN: an extra grant too", [query_on_table],
         "extra", (SWEEP, "dynamodb:Query on ${LockTable.Arn} ")),
        ("an extra dynamodb:Scan on release", [_add(RELEASE, {"Sid": "Extra", "Effect": "Allow",
                                                               "Action": "dynamodb:Scan",
                                                               "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}})],
         "extra", (RELEASE, "dynamodb:Scan")),
        ("an extra BatchGetItem on acquire, conditional", [_add(ACQUIRE, {"Fn::If": ["HasSchedule", {
            "Effect": "Allow", "Action": "dynamodb:BatchGetItem", "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}},
            {"Ref": "AWS::NoValue"}]})],
         "extra", (ACQUIRE, "dynamodb:BatchGetItem")),
        ("release's SendTaskSuccess removed (the hand-off)", [_drop(RELEASE, "states:SendTaskSuccess")],
         "missing", (RELEASE, "states:SendTaskSuccess")),
        ("the sweep's Scan removed (the reconciler lists the locks)", [_drop(SWEEP, "dynamodb:Scan")],
         "missing", (SWEEP, "dynamodb:Scan")),
        ("the sweep's Scan only under the reconciler's condition", [_conditional(SWEEP, "dynamodb:Scan")],
         "missing", (SWEEP, "dynamodb:Scan", "only under a condition")),
        ("the sweep's SendTaskSuccess removed", [_drop(SWEEP, "states:SendTaskSuccess")],
         "missing", (SWEEP, "states:SendTaskSuccess")),
        ("acquire's SendTaskSuccess only under a condition", [_conditional(ACQUIRE, "states:SendTaskSuccess")],
         "missing", (ACQUIRE, "states:SendTaskSuccess", "only under a condition")),
        ("release's GetItem removed (it reads the head waiter)", [_drop(RELEASE, "dynamodb:GetItem")],
         "missing", (RELEASE, "dynamodb:GetItem")),
        ("SendTaskFailure granted to release, never called", [_add(RELEASE, {
            "Effect": "Allow", "Action": "states:SendTaskFailure", "Resource": "*"})],
         "extra", (RELEASE, "states:SendTaskFailure")),
        ("states:SendTask* on the sweep", [_add(SWEEP, {"Effect": "Allow", "Action": "states:SendTask*", "Resource": "*"})],
         "extra", (SWEEP, "states:SendTask*")),
        ("dynamodb:* on release's table", [_add(RELEASE, {"Effect": "Allow", "Action": "dynamodb:*",
                                                          "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}})],
         "extra", (RELEASE, "dynamodb:*")),
        ("SAM's DynamoDBCrudPolicy on release", [_policy(RELEASE, {"DynamoDBCrudPolicy": {"TableName": {"Ref": TABLE}}})],
         "extra", (RELEASE,)),
        ("an Action chosen by a condition on acquire", [_add(ACQUIRE, {
            "Effect": "Allow", "Action": {"Fn::If": ["HasSchedule", "dynamodb:Scan", "dynamodb:GetItem"]},
            "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}})],
         "unreadable", (ACQUIRE, "not a plain string")),
        ("a managed policy on the sweep", [_policy(SWEEP, "arn:aws:iam::aws:policy/AmazonDynamoDBReadOnlyAccess")],
         "unreadable", (SWEEP, "AmazonDynamoDBReadOnlyAccess")),
        ("acquire's code calling BatchWriteItem", [_facts(_calls(ACQUIRE, "dynamodb", "dynamodb:BatchWriteItem"))],
         "missing", (ACQUIRE, "dynamodb:BatchWriteItem")),
        ("the sweep's code calling BatchGetItem", [_facts(_calls(SWEEP, "dynamodb", "dynamodb:BatchGetItem"))],
         "missing", (SWEEP, "dynamodb:BatchGetItem")),
        ("release querying another index", [_facts(_calls(RELEASE, "dynamodb", "dynamodb:Query index/expiry-index"))],
         "missing", (RELEASE, "dynamodb:Query", "/index/expiry-index")),
        ("release querying an index the table does not have",
         [_facts(_calls(RELEASE, "dynamodb", "dynamodb:Query index/expiry-index"))],
         "table", (RELEASE, "expiry-index")),
        ("acquire's code in a transaction (authorised per item action)",
         [_facts(_calls(ACQUIRE, "dynamodb", "dynamodb:TransactWriteItems"))],
         "unreadable", (ACQUIRE, "TransactWriteItems")),
        ("release's code no longer calling GetItem: its grant extra",
         [_facts(lambda f: f["operations"]["release-lock"]["dynamodb"].remove("dynamodb:GetItem"))],
         "extra", (RELEASE, "dynamodb:GetItem")),
        ("the sweep's LOCK_TABLE_NAME another table", [
            lambda t: t["Resources"][SWEEP]["Properties"]["Environment"]["Variables"].update(
                {TABLE_ENV: "some-other-table"})],
         "table", (SWEEP, TABLE_ENV)),
    ]
    for label, changes, rule, words in cases:
        try:
            broken_template, broken_facts = _apply(template, facts, changes)
            facts_only = all(getattr(change, "on_facts", False) for change in changes)
            expanded = shipped_expanded if facts_only else transform(broken_template)
            found = [p for p in problems(broken_template, broken_facts, expanded) if p not in shipped]
        except (FactsError, TemplateError, AssertionError) as error:
            expect(False, f"{rule} reports {label}", error)
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        expect(bool(hits), f"{rule} reports {label}", hits[0] if hits else f"not reported; found {found}")

    # Facts the check cannot use stop it instead of turning it off.
    unreadable = [
        ("the facts without release-lock's operations", [_facts(lambda f: f["operations"].pop("release-lock"))]),
        ("the facts without the sweep's DynamoDB operations",
         [_facts(lambda f: f["operations"]["release-execution-locks"].pop("dynamodb"))]),
        ("the sweep function building another binary", [
            lambda t: t["Resources"][SWEEP]["Metadata"]["BuildProperties"].update(Binary="sweep")]),
    ]
    for label, changes in unreadable:
        try:
            broken_template, broken_facts = _apply(template, facts, changes)
            problems(broken_template, broken_facts, shipped_expanded)
            expect(False, f"stops on {label}", "read on regardless")
        except FactsError as error:
            expect(True, f"stops on {label}", error)
        except (AssertionError, TemplateError) as error:
            expect(False, f"stops on {label}", error)

    # Every store, on the template as written (all_problems specializes it per store).
    shipped_all = all_problems(raw, facts)
    expect(not shipped_all, "the shipped template, every store", shipped_all or "no problem")
    s3_objects = _store_statement(ACQUIRE, "UseS3Store", "ReadAndWriteLockObjects")
    sweep_list = _store_statement(SWEEP, "UseS3Store", "ListTheLockBucket")
    stores_cases: list[tuple[str, list, str, tuple[str, ...]]] = [
        ("acquire's s3:PutObject removed", [lambda t: s3_objects(t).update(Action=["s3:GetObject"])],
         "missing", ("LockStore=s3", ACQUIRE, "s3:PutObject")),
        ("acquire's s3:ListBucket removed (missing objects read as AccessDenied)",
         [lambda t: _store_statements(t, ACQUIRE, "UseS3Store").remove(
             _store_statement(ACQUIRE, "UseS3Store", "ListTheLockBucket")(t))],
         "missing", ("LockStore=s3", ACQUIRE, "AccessDenied")),
        ("the sweep's s3:ListBucket only under an s3:prefix condition",
         [lambda t: sweep_list(t).update(Condition={"StringLike": {"s3:prefix": "locks/.owners/*"}})],
         "missing", ("LockStore=s3", SWEEP, "s3:ListBucket", "AccessDenied")),
        ("release's objects the whole bucket",
         [lambda t: _store_statement(RELEASE, "UseS3Store", "ReleaseLockObjects")(t).update(
             Resource={"Fn::Sub": "arn:${AWS::Partition}:s3:::${LockBucket}/*"})],
         "extra", ("LockStore=s3", RELEASE, "s3:DeleteObject", "${LockBucket}/*")),
        ("s3:DeleteObject for acquire, which never deletes", [lambda t: s3_objects(t).update(
            Action=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"])],
         "extra", ("LockStore=s3", ACQUIRE, "s3:DeleteObject")),
        ("a DynamoDB grant in the S3 store's policy", [lambda t: _store_statements(t, ACQUIRE, "UseS3Store").append(
            {"Effect": "Allow", "Action": "dynamodb:GetItem",
             "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/other"})],
         "extra", ("LockStore=s3", ACQUIRE, "dynamodb:GetItem")),
        ("SendTaskSuccess with the S3 store (no queue)", [lambda t: _store_statements(t, RELEASE, "UseS3Store").append(
            {"Effect": "Allow", "Action": "states:SendTaskSuccess", "Resource": "*"})],
         "extra", ("LockStore=s3", RELEASE, "states:SendTaskSuccess")),
        ("ssm:DeleteParameter instead of DeleteParameters", [lambda t: _store_statement(
            SWEEP, "UseSsmStore", "ReleaseLockParameters")(t).update(
            Action=[a.replace("DeleteParameters", "DeleteParameter") for a in _store_statement(
                SWEEP, "UseSsmStore", "ReleaseLockParameters")(t)["Action"]])],
         "missing", ("LockStore=ssm", SWEEP, "ssm:DeleteParameters")),
        ("acquire's SSM parameters of every stack", [lambda t: _store_statement(
            ACQUIRE, "UseSsmStore", "ReadAndWriteLockParameters")(t).update(Resource={"Fn::Sub":
            "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/*"})],
         "extra", ("LockStore=ssm", ACQUIRE, "parameter/sfn-lock/*")),
        ("an S3 grant with the DynamoDB store", [lambda t: _store_statements(t, RELEASE, "UseDynamoDbStore").append(
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::elsewhere/*"})],
         "extra", ("LockStore=dynamodb", RELEASE, "s3:GetObject")),
        ("the sweep's code calling DeleteObjects, release's DeleteObject grants gone",
         [_facts(_calls(SWEEP, "s3", "s3:DeleteObjects")),
          lambda t: [_store_statement(f, "UseS3Store", "ReleaseLockObjects")(t).update(
              Action=["s3:GetObject", "s3:PutObject"]) for f in (RELEASE, SWEEP)]],
         "missing", ("LockStore=s3", SWEEP, "s3:DeleteObject", "not allowed")),
        ("acquire's code calling DeleteObject (S3), which it is not granted",
         [_facts(_calls(ACQUIRE, "s3", "s3:DeleteObject"))], "missing", ("LockStore=s3", ACQUIRE, "s3:DeleteObject")),
        ("an S3 operation this check cannot map", [_facts(_calls(RELEASE, "s3", "s3:CopyObject"))],
         "unreadable", ("LockStore=s3", "s3:CopyObject")),
        ("an SSM call no function may make", [_facts(_calls(SWEEP, "ssm", "ssm:GetParameterHistory"))],
         "missing", ("LockStore=ssm", SWEEP, "ssm:GetParameterHistory")),
        ("no function's code deleting SSM parameters: the grant extra", [_facts(
            lambda f: f["operations"]["release-execution-locks"]["ssm"].remove("ssm:DeleteParameters"))],
         "extra", ("LockStore=ssm", "ssm:DeleteParameters", "no function calls")),
        ("ssm:DeleteParameter for acquire, which deletes in batches only", [lambda t: _store_statement(
            ACQUIRE, "UseSsmStore", "ReadAndWriteLockParameters")(t)["Action"].append("ssm:DeleteParameter")],
         "extra", ("LockStore=ssm", ACQUIRE, "ssm:DeleteParameter")),
    ]
    for label, changes, rule, words in stores_cases:
        try:
            broken_template, broken_facts = _apply(raw, facts, changes)
            found = [p for p in all_problems(broken_template, broken_facts) if p not in shipped_all]
        except (FactsError, TemplateError, AssertionError, KeyError) as error:
            expect(False, f"{rule} reports {label}", error)
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        expect(bool(hits), f"{rule} reports {label}", hits[0] if hits else f"not reported; found {found}")

    total = 2 + len(cases) + len(unreadable) + len(stores_cases)
    print(f"function permissions self-test: {'all' if not failures else f'{failures} of'} {total} cases "
          f"{'as expected' if not failures else 'NOT as expected'}")
    return 1 if failures else 0
