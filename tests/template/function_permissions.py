"""Each lock function's store permissions in template.yaml, for every lock store
(LockStore), against the AWS operations its code calls.

What a function calls: contract/code-facts.json, section "operations" (function ->
store -> service:Operation), recorded at the wire while the real handlers run
their scenarios on each store (crates/sfn-lock/tests/suite/operations/); that test
fails while the file lists an operation no scenario reaches or misses one that is
called, so the file is what the code does. No .rs file is read here.

What a function may call: its role's statements after the SAM transform
(iam_grants.py): store actions and the task-token actions states:SendTask*; the
sweep's other states: and sqs: actions are sweep_wiring.py's. Resources are
compared as written, !GetAtt LockTable.Arn as ${LockTable.Arn}: write the table's
ARN so, an index's as !Sub ${LockTable.Arn}/index/NAME.

Per store: each value LockStore allows is checked on the template as that value
deploys it (cfn_template.specialize), then expanded by the SAM transform.
    dynamodb  dynamodb:Op on ${LockTable.Arn} (or /index/NAME for an operation
              recorded with its index), states:SendTaskSuccess on "*" (the queue's
              hand-off; no resource-level permissions).
    s3, ssm   each function's grants are exactly its STORE_GRANTS (action, resource
              as written, the statement's Condition; the resources are the
              template's, the functions' shares traced by hand); every operation a
              function calls on that store maps (S3_OPERATIONS; SSM's operations are
              their actions) to an action it is granted; every granted action is
              called by some function. The S3 and SSM stores keep no queue, so no
              task-token grant. S3's GetObject of a missing key is NoSuchKey only
              with s3:ListBucket on the bucket (AccessDenied without it; the store
              reads a missing lock object as free).

Rules
    missing      a call the function makes is not allowed on its resource by an
                 unconditional Allow (what every deployment needs must not hang on
                 a Condition)
    extra        an action allowed on a resource the function never calls it on
                 (least privilege; a wildcard that covers more than the calls counts)
    unreadable   a grant this check cannot evaluate (a managed policy other than
                 AWSLambdaBasicExecutionRole, NotAction, NotResource, a Deny), or an
                 operation it cannot map to an IAM action
    table        the function's store is not LockTable, or it queries an index the
                 table does not have

Dropped with the Rust parsing (issue 25): "unreached" (a DynamoDB call no entry
point reached) needs no grant; the operations test now lists what is reached. The
chains from each binary to its store calls, "a DynamoDB call outside the store's
files" and "SfnWaker calls SendTaskSuccess alone" were code shape: the recorded
operations of each function are the behaviour they stood for.

Usage: function_permissions.py template.yaml | function_permissions.py --self-test
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import code_facts  # noqa: E402
from cfn_template import TemplateError, load, specialize, transform  # noqa: E402
from code_facts import FactsError  # noqa: E402
from iam_grants import TASK_TOKEN_ACTIONS, Grant, grants  # noqa: E402

TABLE = "LockTable"
TABLE_ARN = "${LockTable.Arn}"
TABLE_ENV = "LOCK_TABLE_NAME"  # the older setting of the table DynamoStore is given
URL_ENV = "LOCK_STORE_URL"  # the store: dynamodb://TABLE, s3://..., ssm://...
TABLE_URL = {"Fn::Sub": "dynamodb://${LockTable}"}
STORE_PARAMETER = "LockStore"

ACQUIRE, RELEASE, SWEEP = "AcquireLockFunction", "ReleaseLockFunction", "ReleaseExecutionLocksFunction"
# The binary each function runs, as the facts name it (Metadata.BuildProperties.Binary).
BINARIES = {ACQUIRE: "acquire-lock", RELEASE: "release-lock", SWEEP: "release-execution-locks"}
LOCK_OBJECTS = "arn:${AWS::Partition}:s3:::${LockBucket}/locks/*"  # LOCK_STORE_URL s3://${LockBucket}/locks/
LOCK_BUCKET = "arn:${AWS::Partition}:s3:::${LockBucket}"
LOCK_PARAMETERS = ("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/"
                   "${AWS::StackName}/*")  # LOCK_STORE_URL ssm:///sfn-lock/${AWS::StackName}
SSM_ACTIONS = ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:PutParameter",
               "ssm:DeleteParameters")
# (action, resource as written, the statement's Condition as JSON or "") per function.
# Acquire reads, marks and writes; release reads, writes and unmarks; the sweep lists
# an owner's markers, then releases. SSM's writes delete superseded generations
# (DeleteParameters) five minutes on, by SSM's clock, whichever function writes.
STORE_GRANTS: dict[str, dict[str, set[tuple[str, str, str]]]] = {
    "s3": {
        ACQUIRE: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                  ("s3:ListBucket", LOCK_BUCKET, "")},
        RELEASE: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                  ("s3:DeleteObject", LOCK_OBJECTS, ""), ("s3:ListBucket", LOCK_BUCKET, "")},
        SWEEP: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                ("s3:DeleteObject", LOCK_OBJECTS, ""), ("s3:ListBucket", LOCK_BUCKET, "")},
    },
    "ssm": {function: {(action, LOCK_PARAMETERS, "") for action in SSM_ACTIONS} for function in BINARIES},
}
# The reconciler (the sweep function) lists the store's root path itself, which
# AWS authorizes against that path's own ARN ("GetParametersByPath: the path
# specified in the request, not the parameters returned"), not one under it.
STORE_ROOT = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/${AWS::StackName}"
STORE_GRANTS["ssm"][SWEEP].add(("ssm:GetParametersByPath", STORE_ROOT, ""))
# S3's IAM actions are not its operations' names (SSM's are).
S3_OPERATIONS = {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "PutObject": "s3:PutObject",
                 "DeleteObject": "s3:DeleteObject", "DeleteObjects": "s3:DeleteObject",
                 "ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket"}
SSM_OPERATIONS = {"GetParametersByPath", "PutParameter", "DeleteParameters", "DeleteParameter", "GetParameter",
                  "GetParameters", "GetParameterHistory", "DescribeParameters"}
# DynamoDB operations whose IAM actions are not dynamodb:<Operation>: transactions are
# authorised per item action, PartiQL per statement kind.
NOT_ONE_ACTION = {"TransactWriteItems", "TransactGetItems", "ExecuteStatement", "BatchExecuteStatement",
                  "ExecuteTransaction"}

Facts = dict[str, Any]
Problem = tuple[str, str]  # (rule, message)


@dataclass(frozen=True)
class Need:
    """An IAM action on a resource that one recorded operation needs."""
    action: str
    resource: str
    operation: str  # as the facts record it
    index: str | None = None


def operations(facts: Facts, function: str, store: str) -> list[str]:
    return list(code_facts.get(facts, "operations", BINARIES[function], store))


def dynamodb_needs(facts: Facts, function: str) -> tuple[list[Need], list[str]]:
    """What the function's DynamoDB deployment calls that its role must allow (store
    and task-token actions), and the operations this check cannot map."""
    found, unknown = [], []
    for operation in operations(facts, function, "dynamodb"):
        name, _, index = operation.partition(" index/")
        service, _, op = name.partition(":")
        if service == "dynamodb" and op in NOT_ONE_ACTION:
            unknown.append(f"{function}: {operation}: its IAM actions depend on its items or statement")
        elif service == "dynamodb":
            resource = f"{TABLE_ARN}/index/{index}" if index else TABLE_ARN
            found.append(Need(name, resource, operation, index or None))
        elif name in TASK_TOKEN_ACTIONS:
            found.append(Need(name, "*", operation))
    return found, unknown


def _covers(grant: Grant, need: Need) -> bool:
    return (fnmatch.fnmatchcase(need.action.lower(), grant.action.lower())
            and fnmatch.fnmatchcase(need.resource, grant.resource.replace("[", "[[]")))


def _environment(template: dict, function: str, name: str) -> Any:
    variables = (((template["Resources"][function].get("Properties", {}) or {}).get("Environment", {}) or {})
                 .get("Variables", {}) or {})
    if name in variables:
        return variables[name]
    return ((((template.get("Globals", {}) or {}).get("Function", {}) or {}).get("Environment", {}) or {})
            .get("Variables", {}) or {}).get(name)


def _names_the_table(template: dict, function: str) -> bool:
    """The function's store is LockTable: LOCK_STORE_URL dynamodb://${LockTable} and/or
    LOCK_TABLE_NAME !Ref LockTable, and neither names anything else."""
    url, table = _environment(template, function, URL_ENV), _environment(template, function, TABLE_ENV)
    return (url, table) != (None, None) and url in (None, TABLE_URL) and table in (None, {"Ref": TABLE})


def _built(template: dict, function: str) -> None:
    binary = (((template["Resources"].get(function, {}) or {}).get("Metadata", {}) or {})
              .get("BuildProperties", {}) or {}).get("Binary")
    if binary != BINARIES[function]:
        raise FactsError(f"template: {function} builds {binary!r}, the facts are {BINARIES[function]!r}'s")


def problems(template: dict, facts: Facts, expanded: dict | None = None) -> list[Problem]:
    """The DynamoDB deployment's problems. FactsError if the facts lack a function."""
    if expanded is None:
        expanded = transform(template)
    found: list[Problem] = []
    indexes = {index.get("IndexName") for index in
               (template["Resources"].get(TABLE, {}).get("Properties", {}) or {}).get("GlobalSecondaryIndexes", [])}
    for function in BINARIES:
        _built(template, function)
        needs, unknown = dynamodb_needs(facts, function)
        found += [("unreadable", message) for message in unknown]
        if not _names_the_table(template, function):
            found.append(("table", f"{function}: its store ({URL_ENV} {_environment(template, function, URL_ENV)!r}, "
                                   f"{TABLE_ENV} {_environment(template, function, TABLE_ENV)!r}) is not "
                                   f"{TABLE}: the permissions checked here are on {TABLE}"))
        for index in sorted({need.index for need in needs if need.index} - indexes):
            found.append(("table", f"{function} queries index {index!r}, which {TABLE} does not have"))
        function_grants, unreadable = grants(expanded, function)
        found += [("unreadable", message) for message in unreadable]
        for need in needs:
            if any(_covers(g, need) and not g.conditional for g in function_grants):
                continue
            conditional = [g for g in function_grants if _covers(g, need)]
            found.append(("missing", f"{function} calls {need.action} on {need.resource} ({need.operation}) but "
                                     + (f"is allowed it only under a condition ({conditional[0].where})"
                                        if conditional else "is not allowed to")))
        exact = {(need.action.lower(), need.resource) for need in needs}
        for grant in function_grants:
            if (grant.action.lower(), grant.resource) not in exact:
                found.append(("extra", f"{function} is allowed {grant.action} on {grant.resource} ({grant.where}), "
                                       "which its code never calls there: remove it (least privilege)"))
    return found


def store_actions(facts: Facts, function: str, store: str) -> tuple[dict[str, list[str]], list[str]]:
    """The IAM actions the function's S3 or SSM deployment calls (action -> operations),
    and the store operations this check cannot map. Other services' operations (the
    sweep's Step Functions and SQS calls) are sweep_wiring.py's."""
    calls: dict[str, list[str]] = {}
    unknown: list[str] = []
    for operation in operations(facts, function, store):
        service, _, op = operation.partition(":")
        if service != store:
            continue
        action = S3_OPERATIONS.get(op) if store == "s3" else (operation if op in SSM_OPERATIONS else None)
        if action is None:
            unknown.append(operation)
        else:
            calls.setdefault(action, []).append(operation)
    return calls, unknown


def store_problems(template: dict, facts: Facts, store: str, expanded: dict | None = None) -> list[Problem]:
    """An S3 or SSM deployment's problems: each function's store grants exactly its
    STORE_GRANTS, each of its calls granted, and every granted action called."""
    if expanded is None:
        expanded = transform(template)
    found: list[Problem] = []
    granted_actions: set[str] = set()
    called: dict[str, list[str]] = {}
    for function, expected in STORE_GRANTS[store].items():
        _built(template, function)
        function_grants, unreadable = grants(expanded, function)
        found += [("unreadable", message) for message in unreadable]
        exact = {(action.lower(), resource, condition) for action, resource, condition in expected}
        for grant in function_grants:
            if (grant.action.lower(), grant.resource, grant.condition) not in exact:
                found.append(("extra", f"{function} is allowed {grant.action} on {grant.resource}"
                                       f"{' if ' + grant.condition if grant.condition else ''} ({grant.where}), "
                                       f"which the {store} store does not need there (STORE_GRANTS)"))
            else:
                granted_actions.add(grant.action)
        for action, resource, condition in sorted(expected):
            matching = [g for g in function_grants
                        if (g.action.lower(), g.resource, g.condition) == (action.lower(), resource, condition)]
            if not any(not g.conditional for g in matching):
                found.append(("missing", f"{function} is not allowed {action} on {resource}"
                                         f"{' if ' + condition if condition else ''}"
                                         + (f" but only under a condition ({matching[0].where})" if matching else "")))
        reads = any(g.action == "s3:GetObject" and not g.conditional for g in function_grants)
        lists = any(g.action == "s3:ListBucket" and g.resource == LOCK_BUCKET and not g.condition
                    and not g.conditional for g in function_grants)
        if reads and not lists:
            found.append(("missing", f"{function} may read lock objects (s3:GetObject) but not s3:ListBucket on "
                                     f"{LOCK_BUCKET} without a condition: S3 then answers a missing lock object "
                                     "with AccessDenied, not NoSuchKey"))
        calls, unknown = store_actions(facts, function, store)
        found += [("unreadable", f"{function} calls {operation}: this check cannot map it to an IAM action "
                                 "(S3_OPERATIONS / SSM_OPERATIONS)") for operation in unknown]
        allowed = {g.action.lower() for g in function_grants if not g.conditional}
        for action in sorted(calls):
            called.setdefault(action, []).extend(calls[action])
            if action.lower() not in allowed:
                found.append(("missing", f"{function} calls {action} ({', '.join(calls[action])}) on the {store} "
                                         "store but is not allowed to"))
    for action in sorted(granted_actions - set(called)):
        found.append(("extra", f"the lock functions are allowed {action}, which no function calls on the "
                               f"{store} store ({code_facts.FACTS})"))
    return found


def stores(template: dict) -> list[str]:
    parameter = (template.get("Parameters", {}) or {}).get(STORE_PARAMETER, {}) or {}
    return [str(value) for value in parameter.get("AllowedValues", [])]


def all_problems(template: dict, facts: Facts) -> list[Problem]:
    """Every store's problems, each prefixed with its LockStore value."""
    found: list[Problem] = []
    values = stores(template)
    if "dynamodb" not in values:
        found.append(("store", f"{STORE_PARAMETER} does not allow dynamodb (or is missing)"))
    for store in values:
        label = f"[{STORE_PARAMETER}={store}] "
        if store != "dynamodb" and store not in STORE_GRANTS:
            found.append(("store", f"{label}a store this check does not know: add it to STORE_GRANTS"))
            continue
        try:
            deployed = specialize(template, {STORE_PARAMETER: store})
        except TemplateError as error:
            found.append(("store", f"{label}{error}"))
            continue
        store_found = problems(deployed, facts) if store == "dynamodb" else store_problems(deployed, facts, store)
        found += [(rule, label + message) for rule, message in store_found]
    return found


def report(facts: Facts) -> list[str]:
    return [f"{function} ({binary}) on {store} calls {', '.join(operations(facts, function, store)) or 'nothing'}"
            for function, binary in BINARIES.items() for store in ("dynamodb", "s3", "ssm")]


def main() -> int:
    args = sys.argv[1:]
    try:
        facts = code_facts.load()
        if args == ["--self-test"]:
            from function_permissions_cases import self_test
            return self_test(load(code_facts.ROOT / "template.yaml"), facts)
        if len(args) != 1:
            print(__doc__.strip().splitlines()[-1], file=sys.stderr)
            return 2
        found = all_problems(load(Path(args[0])), facts)
        lines = report(facts)
    except FactsError as error:
        print(f"function permissions: cannot read the code's facts: {error}")
        return 1
    except TemplateError as error:
        print(f"function permissions: cannot transform the template: {error}")
        return 1
    for line in lines:
        print(f"function permissions: {line}")
    for rule, message in found:
        print(f"function permissions: {rule}: {message}")
    print(f"function permissions: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
