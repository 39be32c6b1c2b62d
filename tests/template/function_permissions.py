"""Each lock function's store permissions in template.yaml, for every lock store
(LockStore): with DynamoDB, against the DynamoDB calls its Rust code can make: every
call allowed, and nothing else allowed. The same for the fair queue's
states:SendTaskSuccess (the task-token actions). With S3 and SSM, exactly the
grants of STORE_GRANTS below, and no DynamoDB or task-token grant.

Per store
    Each value LockStore allows is checked on the template as that value deploys
    it (cfn_template.specialize: the store's !If branches taken, the other stores'
    policies gone), then expanded by the SAM transform.
    dynamodb  the rules below, from the Rust source. An s3: or ssm: grant is extra.
    s3, ssm   each function's s3:, ssm:, dynamodb: and task-token grants are
              exactly its STORE_GRANTS (action, resource as written, and the
              statement's Condition; traced by hand, per function, from
              document_store.rs, s3.rs and ssm.rs): missing / extra as below. The S3 and SSM
              stores keep no queue (an acquire with a taskToken is an
              InvalidLockRequest there), so no task-token grant. The calls of
              the store code (the files that use aws_sdk_s3 / aws_sdk_ssm, outside
              #[cfg(test)]) are read as for DynamoDB, but per store, not per
              function: a call whose action no function is granted is "missing",
              a granted action no call needs is "extra", an operation this check
              cannot map to an IAM action is "unreadable". S3's GetObject of a
              missing key is NoSuchKey only with s3:ListBucket on the bucket
              (AccessDenied without it; s3.rs reads a missing lock object as
              free), so a function allowed s3:GetObject without it is "missing".

The semaphore made the store call more than UpdateItem (a marker item: PutItem on
acquire, DeleteItem after a permit's release, GetItem when the sweep finds one
through the owner index); a call the role does not allow fails only on AWS, as an
AccessDenied the local tests (DynamoDB Local, no IAM) never see.

What a function calls, from the Rust source by regex
    Entry points: the LockStore methods each function's code calls (ENTRY_POINTS
    below, each traced by hand from the binary's main.rs; the check stops if that
    trace no longer holds: CHAINS). From each, every `self.<method>(` (and
    `Self::<method>(`) is followed through the methods of DynamoStore: every
    `impl ... DynamoStore` block in crates/sfn-lock/src/dynamodb*.rs, whichever
    file it is in; a method's body is its brace-balanced block, closures and
    all. Each `client.<op>()` in a reached method is a call: op in snake_case ->
    the IAM action dynamodb:PascalCase, on the table's ARN (${LockTable.Arn}), or
    on ${LockTable.Arn}/index/NAME when the request names an index
    (`.index_name(NAME)`, a literal or a const).
    A `waker.wake(` in a reached method is a states:SendTaskSuccess on "*" (the
    queue's hand-off: the action has no resource-level permissions): the one
    `impl Wake for SfnWaker` (queue.rs) must call client.send_task_success() and
    no other Step Functions operation.

What a function may call, from template.yaml after the SAM transform
    The statements of the function's role as CloudFormation will create it: the
    `Policies` written under the function, what SAM policy templates expand to,
    and any AWS::IAM::Policy attached to the role. Only dynamodb:* actions and
    the task-token actions states:SendTask{Success,Failure,Heartbeat} (and
    wildcards that cover them) are compared: the sweep's other states: and sqs:
    actions are sweep_wiring.py's. Resources are compared as written, !GetAtt LockTable.Arn
    as ${LockTable.Arn}: write the table's ARN so, an index's as
    !Sub ${LockTable.Arn}/index/NAME.

Rules
    missing      a call the function makes is not allowed on its resource by an
                 unconditional Allow (what every deployment needs must not hang on
                 a Condition)
    extra        a dynamodb action allowed on a resource the function never calls
                 it on (least privilege; a wildcard that covers more than the calls
                 counts as extra)
    unreached    a client.<op>() in dynamodb*.rs that no function's entry points
                 reach: dead code, or a store method this check does not assign to
                 a function (add it to ENTRY_POINTS; the CLI's operator reads, run
                 with an operator's credentials, are OPERATOR_ENTRY_POINTS)
    unreadable   a grant this check cannot evaluate (a managed policy other than
                 AWSLambdaBasicExecutionRole, NotAction, NotResource, a Deny, a
                 role from outside the template)
    table        the function's LOCK_TABLE_NAME is not !Ref LockTable (the ARNs
                 above would be another table's), or the code queries an index the
                 table does not have

A construct this check reads that is not where it was (a renamed entry point, a
handler that no longer calls it, a store call it does not recognise, an index it
cannot name) stops the check with an error: a rename must not turn it off.

Usage: function_permissions.py template.yaml | function_permissions.py --self-test
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cfn_template import TemplateError, intrinsic, load, specialize, transform  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SRC = "crates/sfn-lock/src"
LOCK_RS, CLEANUP_RS, LAMBDA_RS, QUEUE_RS, RECONCILE_RS = (
    f"{SRC}/{name}" for name in ("lock.rs", "cleanup.rs", "lambda.rs", "queue.rs", "reconcile.rs"))
STORE_FILES = re.compile(rf"{re.escape(SRC)}/dynamodb[a-z_]*\.rs")
TABLE = "LockTable"
TABLE_ARN = "${LockTable.Arn}"
TABLE_ENV = "LOCK_TABLE_NAME"  # the older setting of the table DynamoStore is given (store_url.rs)
URL_ENV = "LOCK_STORE_URL"  # the store (store_url.rs): dynamodb://TABLE, s3://..., ssm://...
TABLE_URL = {"Fn::Sub": "dynamodb://${LockTable}"}
STORE_PARAMETER = "LockStore"

# -- the S3 and SSM stores ----------------------------------------------------------------
ACQUIRE, RELEASE, SWEEP = "AcquireLockFunction", "ReleaseLockFunction", "ReleaseExecutionLocksFunction"
LOCK_OBJECTS = "arn:${AWS::Partition}:s3:::${LockBucket}/locks/*"  # LOCK_STORE_URL s3://${LockBucket}/locks/
LOCK_BUCKET = "arn:${AWS::Partition}:s3:::${LockBucket}"
LOCK_PARAMETERS = ("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/sfn-lock/"
                   "${AWS::StackName}/*")  # LOCK_STORE_URL ssm:///sfn-lock/${AWS::StackName}
# ssm.rs / ssm_calls.rs: read (GetParameter of the current-generation hint, a GetParameters
# probe, or GetParametersByPath of the lock's generations when the hint proves nothing),
# write (DeleteParameters of superseded generations, PutParameter without overwrite, then
# of the hint), mark / unmark (PutParameter / DeleteParameters); the sweep also lists an
# owner's markers (GetParametersByPath).
SSM_ACTIONS = ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:PutParameter",
               "ssm:DeleteParameters")
# (action, resource as written, the statement's Condition as JSON or "") per function,
# from what document_store.rs's methods call per function (acquire: read, mark,
# write; release: read, write, unmark; the sweep: marked, then release's) and
# s3.rs / ssm.rs. With S3, s3:ListBucket for every function that reads a lock
# object (see "Per store" above; the sweep also lists owner markers with it).
STORE_GRANTS: dict[str, dict[str, set[tuple[str, str, str]]]] = {
    "s3": {
        ACQUIRE: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                  ("s3:ListBucket", LOCK_BUCKET, "")},
        RELEASE: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                  ("s3:DeleteObject", LOCK_OBJECTS, ""), ("s3:ListBucket", LOCK_BUCKET, "")},
        SWEEP: {("s3:GetObject", LOCK_OBJECTS, ""), ("s3:PutObject", LOCK_OBJECTS, ""),
                ("s3:DeleteObject", LOCK_OBJECTS, ""), ("s3:ListBucket", LOCK_BUCKET, "")},
    },
    "ssm": {
        ACQUIRE: {(action, LOCK_PARAMETERS, "") for action in SSM_ACTIONS},
        RELEASE: {(action, LOCK_PARAMETERS, "") for action in SSM_ACTIONS},
        SWEEP: {(action, LOCK_PARAMETERS, "") for action in SSM_ACTIONS},
    },
}
# The SDK crate each store's code uses, and its operations' IAM actions (S3's are
# not the operation's name; SSM's are).
STORE_SDK = {"s3": "aws_sdk_s3", "ssm": "aws_sdk_ssm"}
S3_OPERATIONS = {"get_object": "s3:GetObject", "head_object": "s3:GetObject", "put_object": "s3:PutObject",
                 "delete_object": "s3:DeleteObject", "delete_objects": "s3:DeleteObject",
                 "list_objects_v2": "s3:ListBucket", "list_objects": "s3:ListBucket"}
SSM_OPERATIONS = {"get_parameters_by_path", "put_parameter", "delete_parameters", "delete_parameter",
                  "get_parameter", "get_parameters", "get_parameter_history", "describe_parameters"}

# The LockStore methods each function calls, traced from its binary:
# - acquire-lock: main.rs runs handle_acquire (lambda.rs), which calls
#   Locker::answer_within (lock.rs), whose store calls are acquire_with_limit
#   and, for an event with taskToken (the queue), acquire_or_queue.
# - release-lock: main.rs runs handle_release, which calls Locker::release, whose
#   one store call is release_with_limit.
# - release-execution-locks: main.rs runs handle_sweep, which calls
#   Sweeper::sweep_within (cleanup.rs); cleanup.rs's store calls (release_all) are
#   locks_held_by (the owner index, and a semaphore permit's marker), then
#   release_granted_before for each lock found. For the reconciler's scheduled
#   input handle_sweep calls Sweeper::reconcile_within (reconcile.rs), whose own
#   store calls are list_held, queues_to_wake and wake_queue, and which takes
#   cleanup.rs's per-execution path (Judge) for each holder: the same two.
# The trait's provided acquire() and release() (store.rs) only forward to the
# *_with_limit methods, and no function calls them. CHAINS checks each step.
# LockStore methods only the CLI calls (crates/sfn-lock-cli/src/ops/), with the
# operator's credentials: no function is granted what they call.
OPERATOR_ENTRY_POINTS = ("inspect", "list_held")

ENTRY_POINTS = {
    "AcquireLockFunction": ("acquire_with_limit", "acquire_or_queue"),
    "ReleaseLockFunction": ("release_with_limit",),
    "ReleaseExecutionLocksFunction": ("locks_held_by", "release_granted_before", "list_held", "queues_to_wake",
                                      "wake_queue"),
}


@dataclass(frozen=True)
class Chain:
    """binary's main.rs -> handler (lambda.rs) -> `.link(` -> the store calls in
    `scope` (the fn `link` in `file`, or the whole file when whole_file)."""
    binary: str
    handler: str
    link: str
    file: str
    whole_file: bool = False
    # The fn `link` hands the request to (`self.<inner>(`), where the store calls are.
    inner: str | None = None


# Each function's chains; its entry points are the store calls of all of them.
CHAINS = {
    "AcquireLockFunction": (Chain("acquire-lock", "handle_acquire", "answer_within", LOCK_RS, inner="decide"),),
    "ReleaseLockFunction": (Chain("release-lock", "handle_release", "release", LOCK_RS),),
    "ReleaseExecutionLocksFunction": (
        Chain("release-execution-locks", "handle_sweep", "sweep_within", CLEANUP_RS, whole_file=True),
        Chain("release-execution-locks", "handle_sweep", "reconcile_within", RECONCILE_RS, whole_file=True)),
}

# SDK operations whose IAM actions are not dynamodb:<Operation>: transactions are
# authorised per item action (PutItem, UpdateItem, ConditionCheckItem, ...), PartiQL
# per statement kind (PartiQLSelect, ...). A call of one stops the check.
NOT_ONE_ACTION = {"transact_write_items", "transact_get_items", "execute_statement", "batch_execute_statement",
                  "execute_transaction"}
# Client methods that are not requests: the client leaves DynamoStore with them.
NOT_OPERATIONS = {"clone", "config", "from_conf", "with_config"}
# What a DynamoDB call looks like outside dynamodb*.rs (there must be none).
DYNAMODB_OPERATION = re.compile(
    r"\.\s*(put_item|get_item|update_item|delete_item|query|scan|batch_[a-z_]+|transact_[a-z_]+|"
    r"execute_statement|execute_transaction|batch_execute_statement)\s*\(\s*\)")
# The queue's hand-off: a waker's wake() is one SendTaskSuccess. These actions have
# no resource types in the Service Authorization Reference: "*" is their resource.
TASK_TOKEN_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
WAKE = re.compile(r"\bwaker\s*\.\s*wake\s*\(")
WAKE_OPERATION = "send_task_success"
BASIC_EXECUTION_ROLE = re.compile(r"^arn:[^:]+:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole$")

Sources = dict[str, str]  # repository-relative path -> text
Problem = tuple[str, str]  # (rule, message)


class SourceError(Exception):
    """A construct this check reads is not where it was: fix the check."""


# -- reading the Rust source ------------------------------------------------------------
# A raw string, a string, a char literal or a comment, whichever starts first.
_LITERAL_OR_COMMENT = re.compile(
    r'(?<![A-Za-z0-9_])r(#*)".*?"\1|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'|//[^\n]*|/\*.*?\*/', re.S)


def _code(text: str) -> str:
    """The text with comments blanked and the brackets and semicolons inside
    literals blanked, the same length as the text (offsets and lines stay)."""
    def blank(match: re.Match) -> str:
        token = match.group()
        if token.startswith("/"):
            return re.sub(r"[^\n]", " ", token)
        return re.sub(r"[{}();]", " ", token)
    return _LITERAL_OR_COMMENT.sub(blank, text)


def _block_at(code: str, start: int, where: str) -> tuple[int, int]:
    """(start, end) of the body of the brace-balanced block opening at `start`."""
    depth = 0
    for position in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[position], 0)
        if depth == 0:
            return start + 1, position
    raise SourceError(f"{where}: unbalanced braces")


def _fn_span(code: str, name: str, where: str) -> tuple[int, int]:
    """(start, end) of the body of the one `fn name` in `code`."""
    found = list(re.finditer(rf"\bfn\s+{name}\b[^{{;]*\{{", code))
    if len(found) != 1:
        raise SourceError(f"{where}: {len(found) or 'no'} `fn {name}`")
    return _block_at(code, found[0].end() - 1, where)


def _fn_body(code: str, name: str, where: str) -> str:
    start, end = _fn_span(code, name, where)
    return code[start:end]


def _line(code: str, position: int) -> int:
    return code.count("\n", 0, position) + 1


def _statement_end(code: str, position: int) -> int:
    """Where the statement holding `position` ends: its `;`, or the brace closing
    the block it is the tail expression of."""
    depth = 0
    for index in range(position, len(code)):
        char = code[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return index
        elif char == ";" and depth == 0:
            return index
    return len(code)


@dataclass(frozen=True)
class Call:
    """One `client.<op>()` in dynamodb*.rs."""
    op: str
    index: str | None
    file: str
    line: int
    method: str | None  # the DynamoStore method it is in; None outside every one
    service: str = "dynamodb"  # "states": a waker's SendTaskSuccess

    @property
    def action(self) -> str:
        return f"{self.service}:" + "".join(word.capitalize() for word in self.op.split("_"))

    @property
    def resource(self) -> str:
        if self.service != "dynamodb":
            return "*"
        return f"{TABLE_ARN}/index/{self.index}" if self.index else TABLE_ARN

    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


@dataclass
class Method:
    name: str
    file: str
    line: int
    body: str
    trait: str | None  # None: inherent impl


@dataclass
class Store:
    methods: dict[str, list[Method]]  # a name can be in an inherent impl and a trait impl
    calls: list[Call]


_IMPL = re.compile(r"\bimpl\b(?:\s*<[^{};]*?>)?\s+(?:(?P<trait>[A-Za-z_][\w:]*(?:<[^{};]*?>)?)\s+for\s+)?"
                   r"DynamoStore\b[^{;]*\{")
_CLIENT_CALL = re.compile(r"\bclient\s*\.\s*([a-z_][a-z0-9_]*)\s*\(")


def _arguments(code: str, method: str) -> list[str]:
    """The argument text of every `.method(...)` in `code` (balanced parentheses)."""
    found = []
    for match in re.finditer(rf"\.\s*{method}\s*\(", code):
        depth, position = 1, match.end()
        while depth and position < len(code):
            depth += {"(": 1, ")": -1}.get(code[position], 0)
            position += 1
        found.append(code[match.end():position - 1].strip())
    return found


def _constants(sources: Sources) -> dict[str, str]:
    """Every `const NAME: &str = "value";` of the store files."""
    found: dict[str, str] = {}
    for path, text in sources.items():
        if STORE_FILES.fullmatch(path):
            for name, value in re.findall(r'\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:\'static\s+)?str\s*=\s*"([^"]*)"\s*;',
                                          text):
                found[name] = value
    return found


def _index(argument: str, constants: dict[str, str], where: str) -> str:
    argument = argument.strip()
    literal = re.fullmatch(r'"([^"]*)"', argument)
    if literal:
        return literal.group(1)
    name = argument.rsplit("::", 1)[-1]
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and name in constants:
        return constants[name]
    raise SourceError(f"{where}: cannot name the index in .index_name({argument})")


def read_store(sources: Sources) -> Store:
    """DynamoStore's methods and every DynamoDB call in dynamodb*.rs."""
    files = sorted(path for path in sources if STORE_FILES.fullmatch(path))
    if not files:
        raise SourceError(f"no {SRC}/dynamodb*.rs")
    if not any(re.search(r"\bstruct\s+DynamoStore\b", _code(sources[path])) for path in files):
        raise SourceError(f"no `struct DynamoStore` in {SRC}/dynamodb*.rs")
    constants = _constants(sources)
    methods: dict[str, list[Method]] = {}
    spans: list[tuple[str, int, int, str]] = []  # (file, start, end, method)
    calls: list[Call] = []
    for path in files:
        code = _code(sources[path])
        for impl in _IMPL.finditer(code):
            start, end = _block_at(code, impl.end() - 1, path)
            position = start
            while True:
                fn = re.compile(r"\bfn\s+(\w+)\b[^{;]*([{;])").search(code, position, end)
                if not fn:
                    break
                if fn.group(2) == ";":
                    position = fn.end()
                    continue
                body_start, body_end = _block_at(code, fn.end() - 1, path)
                name = fn.group(1)
                methods.setdefault(name, []).append(
                    Method(name, path, _line(code, fn.start()), code[body_start:body_end], impl.group("trait")))
                spans.append((path, body_start, body_end, name))
                position = body_end + 1
        for escape in re.finditer(r"\bself\s*\.\s*client\b(?!\s*\.\s*\w+\s*\()", code):
            raise SourceError(f"{path}:{_line(code, escape.start())}: the client leaves DynamoStore's methods "
                              "(self.client not called on): this check cannot follow it")
        for match in _CLIENT_CALL.finditer(code):
            op, line = match.group(1), _line(code, match.start())
            where = f"{path}:{line}"
            if op in NOT_OPERATIONS:
                raise SourceError(f"{where}: client.{op}(): the client leaves DynamoStore; this check cannot follow it")
            if op in NOT_ONE_ACTION:
                raise SourceError(f"{where}: client.{op}(): its IAM actions depend on its items or statement; "
                                  "this check cannot derive them")
            statement = code[match.end() - 1:_statement_end(code, match.end() - 1)]
            indexes = _arguments(statement, r"(?:set_)?index_name")
            if len(indexes) > 1 or re.search(r"\.\s*set_index_name\s*\(", statement):
                raise SourceError(f"{where}: cannot read the index of client.{op}()")
            index = _index(indexes[0], constants, where) if indexes else None
            inside = [name for file, start, end, name in spans if file == path and start <= match.start() < end]
            calls.append(Call(op, index, path, line, inside[-1] if inside else None))
        for match in WAKE.finditer(code):
            inside = [name for file, start, end, name in spans if file == path and start <= match.start() < end]
            calls.append(Call(WAKE_OPERATION, None, path, _line(code, match.start()),
                              inside[-1] if inside else None, service="states"))
    if not methods:
        raise SourceError(f"no `impl DynamoStore` in {SRC}/dynamodb*.rs")
    return Store(methods, calls)


def _self_calls(method: Method) -> set[str]:
    return set(re.findall(r"\b(?:self\s*\.|Self\s*::)\s*(\w+)\s*\(", method.body))


def reach(store: Store, entries: tuple[str, ...]) -> dict[str, list[str]]:
    """Every DynamoStore method the entry points reach: name -> the path to it."""
    paths: dict[str, list[str]] = {}
    queue: deque[str] = deque()
    for entry in entries:
        implemented = [m for m in store.methods.get(entry, []) if m.trait and m.trait.split("<")[0].endswith("LockStore")]
        if not implemented:
            raise SourceError(f"entry point {entry} is not a method of `impl LockStore for DynamoStore` in "
                              f"{SRC}/dynamodb*.rs: renamed? update ENTRY_POINTS")
        paths[entry] = [entry]
        queue.append(entry)
    while queue:
        name = queue.popleft()
        for method in store.methods[name]:
            for called in sorted(_self_calls(method)):
                if called not in store.methods:
                    raise SourceError(f"{method.file}: {name} calls self.{called}(), which is no method of "
                                      "DynamoStore in dynamodb*.rs: this check cannot follow it")
                if called not in paths:
                    paths[called] = paths[name] + [called]
                    queue.append(called)
    return paths


def _store_calls(code: str) -> list[tuple[str, int]]:
    """(LockStore method, position) of every `store.<method>(` in `code`."""
    return [(m.group(1), m.start()) for m in re.finditer(r"\bstore\s*\.\s*(\w+)\s*\(", code)]


def _check_chain(template: dict, sources: Sources, function: str, chain: Chain,
                 covered: dict[str, list[tuple[int, int]]]) -> set[str]:
    """The store methods one chain of the function reaches; its scope is added to `covered`."""
    resource = (template.get("Resources", {}) or {}).get(function)
    if resource is None:
        raise SourceError(f"template: no {function}")
    binary = ((resource.get("Metadata", {}) or {}).get("BuildProperties", {}) or {}).get("Binary")
    if binary != chain.binary:
        raise SourceError(f"template: {function} builds {binary!r}, this check follows {chain.binary!r}")
    main = f"crates/{chain.binary}/src/main.rs"
    if main not in sources:
        raise SourceError(f"no {main}")
    if not re.search(rf"\b{chain.handler}\s*\(", _code(sources[main])):
        raise SourceError(f"{main} does not call {chain.handler}: update CHAINS")
    handler = _fn_body(_code(sources[LAMBDA_RS]), chain.handler, LAMBDA_RS)
    if not re.search(rf"\.\s*{chain.link}\s*\(", handler):
        raise SourceError(f"{LAMBDA_RS}: {chain.handler} does not call .{chain.link}(: update CHAINS")
    if chain.file not in sources:
        raise SourceError(f"no {chain.file}")
    code = _code(sources[chain.file])
    start, end = _fn_span(code, chain.link, chain.file)
    if chain.inner:
        if not re.search(rf"\bself\s*\.\s*{chain.inner}\s*\(", code[start:end]):
            raise SourceError(f"{chain.file}: fn {chain.link} does not call self.{chain.inner}(: update CHAINS")
        start, end = _fn_span(code, chain.inner, chain.file)
    if chain.whole_file:
        start, end = 0, len(code)
    covered.setdefault(chain.file, []).append((start, end))
    return {name for name, _ in _store_calls(code[start:end])}


def check_chains(template: dict, sources: Sources) -> None:
    """Each function's entry points are still the ones its code reaches."""
    covered: dict[str, list[tuple[int, int]]] = {}
    for function, chains in CHAINS.items():
        called_by_function: set[str] = set()
        for chain in chains:
            called_by_function |= _check_chain(template, sources, function, chain, covered)
        if sorted(called_by_function) != sorted(ENTRY_POINTS[function]):
            where = ", ".join(f"{c.file} ({'the file' if c.whole_file else 'fn ' + c.link})" for c in chains)
            raise SourceError(f"{where}: {function}'s code calls store methods {sorted(called_by_function)}, "
                              f"this check follows {sorted(ENTRY_POINTS[function])}: update ENTRY_POINTS")
    for path, spans in covered.items():
        code = _code(sources[path])
        for name, position in _store_calls(code):
            if not any(start <= position < end for start, end in spans):
                raise SourceError(f"{path}:{_line(code, position)}: store.{name}() is made by no function this "
                                  "check follows: update CHAINS and ENTRY_POINTS")
    for path, text in sources.items():
        # The CLI runs with its operator's credentials, not a function's role
        # (its clock check reads the lock's item: src/run/clock/skew.rs).
        if STORE_FILES.fullmatch(path) or path.startswith("crates/sfn-lock-cli/"):
            continue
        found = DYNAMODB_OPERATION.search(_code(text))
        if found:
            raise SourceError(f"{path}:{_line(text, found.start())}: a DynamoDB call outside {SRC}/dynamodb*.rs; "
                              "this check reads DynamoStore only")
    if not any(re.search(rf'"{name}"', text) for name in (TABLE_ENV, URL_ENV) for text in sources.values()):
        raise SourceError(f"no source reads {TABLE_ENV} or {URL_ENV}: update TABLE_ENV, URL_ENV")
    check_waker(sources)


def check_waker(sources: Sources) -> None:
    """A waker's wake() is one states:SendTaskSuccess: the one Wake the binaries can
    be given (test code aside) is queue.rs's SfnWaker, and it calls that alone."""
    found = []
    for path, text in sources.items():
        code = _code(text)
        tests_start = code.find("#[cfg(test)]")
        for impl in re.finditer(r"\bimpl\s+Wake\s+for\s+(\w+)[^{;]*\{", code):
            if tests_start < 0 or impl.start() < tests_start:
                found.append((path, impl.group(1), impl))
    if [(path, name) for path, name, _ in found] != [(QUEUE_RS, "SfnWaker")]:
        raise SourceError(f"the Wake implementations outside tests are {[(p, n) for p, n, _ in found]}, not "
                          f"{QUEUE_RS}'s SfnWaker alone: this check maps wake() to SendTaskSuccess for that one")
    code = _code(sources[QUEUE_RS])
    start, end = _block_at(code, found[0][2].end() - 1, QUEUE_RS)
    operations = sorted(set(_CLIENT_CALL.findall(code[start:end])))
    if operations != [WAKE_OPERATION]:
        raise SourceError(f"{QUEUE_RS}: SfnWaker's wake calls {operations}, not [{WAKE_OPERATION!r}]: "
                          "update WAKE_OPERATION and the task-token grants")


@dataclass(frozen=True)
class Need:
    action: str
    resource: str
    call: Call
    path: tuple[str, ...]

    def describe(self) -> str:
        return f"{' -> '.join(self.path)} ({self.call.where()})"


def needs(template: dict, sources: Sources) -> tuple[dict[str, list[Need]], list[Call]]:
    """What each function calls, and the calls no function reaches."""
    check_chains(template, sources)
    store = read_store(sources)
    found: dict[str, list[Need]] = {}
    reached: set[str] = set()
    for function, entries in ENTRY_POINTS.items():
        paths = reach(store, entries)
        reached |= set(paths)
        found[function] = [Need(call.action, call.resource, call, tuple(paths[call.method]))
                           for call in store.calls if call.method in paths]
    # The operator's reads (sfn-lock status, list) run with the operator's own
    # credentials, never in a function: reached, and needing no function grant.
    reached |= set(reach(store, OPERATOR_ENTRY_POINTS))
    return found, [call for call in store.calls if call.method not in reached]


# -- the template -----------------------------------------------------------------------
@dataclass(frozen=True)
class Grant:
    action: str  # as written: dynamodb:UpdateItem, dynamodb:*, *
    resource: str  # as text: ${LockTable.Arn}, ${LockTable.Arn}/index/owner-index, arn:...
    conditional: bool
    where: str
    condition: str = ""  # the statement's Condition, as JSON ("" for none)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _branches(value: Any, conditional: bool = False) -> list[tuple[Any, bool]]:
    """The values an Fn::If can take (AWS::NoValue dropped), each with whether it
    hangs on a condition."""
    fn = intrinsic(value)
    if fn and fn[0] == "Fn::If":
        return [found for branch in fn[1][1:] for found in _branches(branch, True)]
    if fn and fn == ("Ref", "AWS::NoValue"):
        return []
    return [(value, conditional)]


def _text(value: Any) -> str:
    """A Resource value as one string: ${Name.Attribute} for !GetAtt, ${Name} for !Ref."""
    if isinstance(value, (str, int, float)):
        return str(value)
    fn = intrinsic(value)
    if fn:
        key, arg = fn
        if key == "Ref":
            return f"${{{arg}}}"
        if key == "Fn::GetAtt":
            return "${" + (arg if isinstance(arg, str) else ".".join(arg)) + "}"
        if key == "Fn::Sub" and isinstance(arg, str):
            return arg
        if key == "Fn::Sub" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str):
            text, variables = arg
            for name, variable in (variables or {}).items():
                text = text.replace(f"${{{name}}}", _text(variable))
            return text
        if key == "Fn::Join" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], list):
            return str(arg[0]).join(_text(part) for part in arg[1])
    return json.dumps(value, sort_keys=True)


def _resources(value: Any, conditional: bool) -> list[tuple[str, bool]]:
    found = []
    for item, item_conditional in _branches(value, conditional):
        for element in _as_list(item):
            for leaf, leaf_conditional in _branches(element, item_conditional):
                found.append((_text(leaf), leaf_conditional))
    return found


def _is_checked(action: str) -> bool:
    """Whether the action (or pattern) can grant a store action (dynamodb, s3, ssm) or a
    task-token action."""
    service = action.split(":", 1)[0] if ":" in action else action
    return (any(fnmatch.fnmatchcase(store, service.lower()) for store in ("dynamodb", "s3", "ssm"))
            or action.strip() == "*"
            or any(fnmatch.fnmatchcase(known.lower(), action.lower()) for known in TASK_TOKEN_ACTIONS))


def _documents(expanded: dict, function: str) -> tuple[list[tuple[Any, str]], list[str]]:
    """(the policy documents of the function's role, with where each is; what cannot be read)."""
    resources = expanded.get("Resources", {}) or {}
    lam = resources.get(function, {})
    if lam.get("Type") != "AWS::Lambda::Function":
        return [], [f"{function}: not a function after the SAM transform"]
    role = intrinsic((lam.get("Properties", {}) or {}).get("Role"))
    name = None
    if role and role[0] == "Fn::GetAtt":  # SAM's own role: !GetAtt <Function>Role.Arn
        name = (role[1] if isinstance(role[1], str) else role[1][0]).split(".")[0]
    if name is None or (resources.get(name, {}) or {}).get("Type") != "AWS::IAM::Role":
        return [], [f"{function}: its role is not one of this template's AWS::IAM::Role resources; "
                    "its permissions cannot be checked"]
    properties = resources[name].get("Properties", {}) or {}
    documents, unreadable = [], []
    for policy, _ in [b for p in _as_list(properties.get("Policies", [])) for b in _branches(p)]:
        if isinstance(policy, dict) and "PolicyDocument" in policy:
            documents.append((policy["PolicyDocument"], f"{name} {policy.get('PolicyName', '?')}"))
    attached = {other for other, resource in resources.items()
                if resource.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
                and {"Ref": name} in _as_list((resource.get("Properties", {}) or {}).get("Roles", []))}
    for arn, _ in [b for a in _as_list(properties.get("ManagedPolicyArns", [])) for b in _branches(a)]:
        ref = intrinsic(arn)
        if ref and ref[0] == "Ref" and (resources.get(ref[1], {}) or {}).get("Type") == "AWS::IAM::ManagedPolicy":
            attached.add(ref[1])
        elif not (isinstance(arn, str) and BASIC_EXECUTION_ROLE.match(arn)):
            unreadable.append(f"{function}: managed policy {_text(arn)} on its role: this check cannot see what "
                              "it grants; grant DynamoDB actions in the function's Policies")
    for other in sorted(attached):
        documents.append(((resources[other].get("Properties", {}) or {}).get("PolicyDocument", {}), other))
    return documents, unreadable


def grants(expanded: dict, function: str) -> tuple[list[Grant], list[str]]:
    """The function's dynamodb grants, and what in its role cannot be evaluated."""
    documents, unreadable = _documents(expanded, function)
    found: list[Grant] = []
    for document, where in documents:
        for raw in _as_list((document or {}).get("Statement", [])):
            for statement, conditional in _branches(raw):
                if not isinstance(statement, dict):
                    unreadable.append(f"{function}: {where}: a statement this check cannot read: {statement!r}")
                    continue
                label = f"{where} Sid {statement.get('Sid', '(none)')}"
                if "NotAction" in statement:
                    unreadable.append(f"{function}: {label}: NotAction (it grants every other action, dynamodb too)")
                    continue
                written = _as_list(statement.get("Action", []))
                if any(not isinstance(action, str) for action in written):
                    unreadable.append(f"{function}: {label}: an Action that is not a plain string: {written!r}")
                    continue
                actions = [action for action in written if _is_checked(action)]
                if not actions:
                    continue
                if statement.get("Effect") != "Allow":
                    unreadable.append(f"{function}: {label}: a {statement.get('Effect')} of {actions}: "
                                      "this check evaluates Allow statements only")
                    continue
                if "NotResource" in statement:
                    unreadable.append(f"{function}: {label}: NotResource for {actions}")
                    continue
                condition = json.dumps(statement["Condition"], sort_keys=True) if statement.get("Condition") else ""
                for resource, resource_conditional in _resources(statement.get("Resource", []), conditional):
                    found += [Grant(action, resource, resource_conditional, label, condition) for action in actions]
    return found, unreadable


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


def problems(template: dict, sources: Sources, expanded: dict | None = None) -> list[Problem]:
    """Every rule's problems. SourceError if the code cannot be read."""
    needed, unreached = needs(template, sources)
    if expanded is None:
        expanded = transform(template)
    found: list[Problem] = []
    indexes = {index.get("IndexName") for index in
               (template["Resources"].get(TABLE, {}).get("Properties", {}) or {}).get("GlobalSecondaryIndexes", [])}
    for function, function_needs in needed.items():
        if not _names_the_table(template, function):
            found.append(("table", f"{function}: its store ({URL_ENV} {_environment(template, function, URL_ENV)!r}, "
                                   f"{TABLE_ENV} {_environment(template, function, TABLE_ENV)!r}) is not "
                                   f"{TABLE}: the permissions checked here are on {TABLE}"))
        for index in sorted({need.call.index for need in function_needs if need.call.index} - indexes):
            found.append(("table", f"{function} queries index {index!r}, which {TABLE} does not have"))
        function_grants, unreadable = grants(expanded, function)
        found += [("unreadable", message) for message in unreadable]
        for key in sorted({(need.action, need.resource) for need in function_needs}):
            need = next(n for n in function_needs if (n.action, n.resource) == key)
            if any(_covers(g, need) and not g.conditional for g in function_grants):
                continue
            conditional = [g for g in function_grants if _covers(g, need)]
            via = "; ".join(n.describe() for n in function_needs if (n.action, n.resource) == key)
            found.append(("missing", f"{function} calls {need.action} on {need.resource} ({via}) but "
                                     + (f"is allowed it only under a condition ({conditional[0].where})"
                                        if conditional else "is not allowed to")))
        exact = {(need.action.lower(), need.resource) for need in function_needs}
        for grant in function_grants:
            if (grant.action.lower(), grant.resource) not in exact:
                found.append(("extra", f"{function} is allowed {grant.action} on {grant.resource} ({grant.where}), "
                                       "which its code never calls there: remove it (least privilege)"))
    for call in unreached:
        found.append(("unreached", f"{call.where()}: client.{call.op}() ({call.action}) in "
                                   f"{'DynamoStore::' + call.method if call.method else 'no DynamoStore method'} is "
                                   "reached by no function's entry points: dead code, or a store method no "
                                   "function is assigned (ENTRY_POINTS)"))
    return found


def store_calls(sources: Sources, store: str) -> tuple[dict[str, list[str]], list[str]]:
    """The IAM actions the S3 or SSM store's code calls (action -> where), and the
    operations this check cannot map. The code: every source file that uses the
    store's SDK crate, up to its #[cfg(test)]."""
    calls: dict[str, list[str]] = {}
    unknown: list[str] = []
    for path, text in sorted(sources.items()):
        if not re.search(rf"\b{STORE_SDK[store]}\b", text):
            continue
        code = _code(text)
        tests = code.find("#[cfg(test)]")
        code = code[:tests] if tests >= 0 else code
        for match in _CLIENT_CALL.finditer(code):
            op, where = match.group(1), f"{Path(path).name}:{_line(code, match.start())}"
            if op in NOT_OPERATIONS:
                continue
            if store == "s3" and op in S3_OPERATIONS:
                calls.setdefault(S3_OPERATIONS[op], []).append(where)
            elif store == "ssm" and op in SSM_OPERATIONS:
                calls.setdefault("ssm:" + "".join(w.capitalize() for w in op.split("_")), []).append(where)
            else:
                unknown.append(f"client.{op}() ({where})")
    return calls, unknown


def store_problems(template: dict, sources: Sources, store: str, expanded: dict | None = None) -> list[Problem]:
    """An S3 or SSM deployment's problems: each function's store grants exactly its
    STORE_GRANTS, and the store's calls all granted and all needed."""
    if expanded is None:
        expanded = transform(template)
    found: list[Problem] = []
    granted_actions: set[str] = set()
    for function, expected in STORE_GRANTS[store].items():
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
    calls, unknown = store_calls(sources, store)
    found += [("unreadable", f"the {store} store's {call}: this check cannot map it to an IAM action "
                             "(S3_OPERATIONS / SSM_OPERATIONS)") for call in unknown]
    for action in sorted(set(calls) - granted_actions):
        found.append(("missing", f"the {store} store calls {action} ({', '.join(calls[action])}), which no "
                                 "lock function is allowed"))
    if calls:
        for action in sorted(granted_actions - set(calls)):
            found.append(("extra", f"the lock functions are allowed {action}, which the {store} store's code "
                                   "never calls"))
    return found


def stores(template: dict) -> list[str]:
    parameter = (template.get("Parameters", {}) or {}).get(STORE_PARAMETER, {}) or {}
    return [str(value) for value in parameter.get("AllowedValues", [])]


def all_problems(template: dict, sources: Sources) -> list[Problem]:
    """Every store's problems, each prefixed with its LockStore value."""
    found: list[Problem] = []
    values = stores(template)
    if "dynamodb" not in values:
        found.append(("store", f"{STORE_PARAMETER} does not allow dynamodb (or is missing): this check "
                               "follows the DynamoDB store's code"))
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
        store_found = (problems(deployed, sources) if store == "dynamodb"
                       else store_problems(deployed, sources, store))
        found += [(rule, label + message) for rule, message in store_found]
    return found


def report(template: dict, sources: Sources) -> list[str]:
    needed, _ = needs(template, sources)
    lines = []
    for function, function_needs in needed.items():
        lines.append(f"{function} ({CHAINS[function][0].binary}): entry points {', '.join(ENTRY_POINTS[function])}")
        for key in sorted({(need.action, need.resource) for need in function_needs}):
            sites = sorted({f"{need.call.method} ({need.call.where()})" for need in function_needs
                            if (need.action, need.resource) == key})
            lines.append(f"    needs {key[0]} on {key[1]}: {', '.join(sites)}")
    return lines


def read_sources(root: Path = ROOT) -> Sources:
    """Every Rust source file of the crates under `root` (the template's folder)."""
    sources = {str(path.relative_to(root)): path.read_text() for path in sorted((root / "crates").glob("*/src/**/*.rs"))}
    missing = [path for path in (LOCK_RS, CLEANUP_RS, LAMBDA_RS, RECONCILE_RS) if path not in sources]
    if missing:
        raise SourceError(f"{', '.join(missing)} not found under {root}")
    return sources


# -- self-test --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Edit:
    """A change to one source file: the one match of the regex `old` replaced."""
    path: str
    old: str
    new: str

    def apply(self, sources: Sources) -> None:
        text, count = re.subn(self.old, self.new, sources[self.path])
        if count != 1:
            raise AssertionError(f"self-test: {count} matches of {self.old!r} in {self.path}; update the case")
        sources[self.path] = text


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


def _insert_into(path: str, method: str, statement: str) -> _Edit:
    """`statement` as the first line of `fn method`'s body."""
    return _Edit(path, rf"(\bfn\s+{method}\b[^{{;]*\{{)", rf"\g<1>\n        {statement}")


def _apply(template: dict, sources: Sources, changes: list) -> tuple[dict, Sources]:
    template, sources = copy.deepcopy(template), dict(sources)
    for change in changes:
        if isinstance(change, _Edit):
            change.apply(sources)
        else:
            change(template)
    return template, sources


STORE_RS, PERMIT_WRITES_RS, PERMITS_RS = (f"{SRC}/{name}" for name in
                                          ("dynamodb_store.rs", "dynamodb_permit_writes.rs", "dynamodb_permits.rs"))
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


def _prepend(path: str, code: str) -> _Edit:
    """`code` at the top of `path` (above any #[cfg(test)])."""
    return _Edit(path, r"\A", code.replace("\\", "\\\\") + "\n")


def self_test(raw: dict, sources: Sources) -> int:
    failures = 0
    # The DynamoDB cases: the template as LockStore dynamodb (the default) deploys it.
    template = specialize(raw, {STORE_PARAMETER: "dynamodb"})

    def expect(ok: bool, label: str, detail: Any = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}{': ' + str(detail) if detail != '' else ''}")

    try:
        shipped_expanded = transform(template)
        shipped = problems(template, sources, shipped_expanded)
        expect(True, "reads the shipped template and source", f"{len(shipped)} problem(s) there")
    except (SourceError, TemplateError) as error:
        expect(False, "reads the shipped template and source", error)
        return 1

    def query_on_table(t: dict) -> None:
        statement = _with_action(t, SWEEP, "dynamodb:Query")
        if statement.get("Resource") != INDEX_ARN:
            raise AssertionError("self-test: the sweep's Query is not on the owner index; update the case")
        statement["Resource"] = {"Fn::GetAtt": [TABLE, "Arn"]}

    # Each case: (label, changes, rule, words its new problem must contain).
    cases: list[tuple[str, list, str, tuple[str, ...]]] = [
        ("acquire's PutItem removed from its policy", [_drop(ACQUIRE, "dynamodb:PutItem")],
         "missing", (ACQUIRE, "dynamodb:PutItem", "put_marker")),
        ("acquire's PutItem only under a condition", [_conditional(ACQUIRE, "dynamodb:PutItem")],
         "missing", (ACQUIRE, "dynamodb:PutItem", "only under a condition")),
        ("release's DeleteItem removed", [_drop(RELEASE, "dynamodb:DeleteItem")],
         "missing", (RELEASE, "dynamodb:DeleteItem", "delete_marker")),
        ("the sweep's GetItem removed", [_drop(SWEEP, "dynamodb:GetItem")],
         "missing", (SWEEP, "dynamodb:GetItem", "marker_lock")),
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
         "missing", (RELEASE, "states:SendTaskSuccess", "pump")),
        ("the sweep's Scan removed (the reconciler lists the locks)", [_drop(SWEEP, "dynamodb:Scan")],
         "missing", (SWEEP, "dynamodb:Scan", "list_held -> scan_held")),
        ("the sweep's Scan only under the reconciler's condition", [_conditional(SWEEP, "dynamodb:Scan")],
         "missing", (SWEEP, "dynamodb:Scan", "only under a condition")),
        ("the sweep's SendTaskSuccess removed", [_drop(SWEEP, "states:SendTaskSuccess")],
         "missing", (SWEEP, "states:SendTaskSuccess", "pump")),
        ("acquire's SendTaskSuccess only under a condition", [_conditional(ACQUIRE, "states:SendTaskSuccess")],
         "missing", (ACQUIRE, "states:SendTaskSuccess", "only under a condition")),
        ("release's GetItem removed (it reads the head waiter)", [_drop(RELEASE, "dynamodb:GetItem")],
         "missing", (RELEASE, "dynamodb:GetItem", "read_waiter")),
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
        ("self.client.batch_write_item() in put_marker (acquire reaches it)",
         [_insert_into(PERMIT_WRITES_RS, "put_marker", "let _ = self.client.batch_write_item().send().await;")],
         "missing", (ACQUIRE, "dynamodb:BatchWriteItem", "acquire_with_limit -> put_marker")),
        ("self.client.batch_get_item() in marker_lock (the sweep reaches it)",
         [_insert_into(PERMIT_WRITES_RS, "marker_lock", "let _ = self.client.batch_get_item().send().await;")],
         "missing", (SWEEP, "dynamodb:BatchGetItem", "locks_held_by -> marker_lock")),
        ("a query of another index in release_any",
         [_insert_into(STORE_RS, "release_any",
                       'let _ = self.client.query().index_name("expiry-index").send().await;')],
         "missing", (RELEASE, "dynamodb:Query", "/index/expiry-index")),
        ("a DynamoStore method that no entry point reaches",
         [_Edit(PERMITS_RS, r"\Z", "\nimpl DynamoStore {\n    pub(crate) async fn scan_all(&self) {\n"
                                  "        let _ = self.client.scan().send().await;\n    }\n}\n")],
         "unreached", ("client.scan()", "scan_all", "dead code")),
        ("a DynamoDB call in a free fn of dynamodb*.rs",
         [_Edit(PERMITS_RS, r"\Z", "\nasync fn stray(store: &DynamoStore) {\n"
                                  "    let _ = store.client.delete_table().send().await;\n}\n")],
         "unreached", ("client.delete_table()", "no DynamoStore method")),
        ("the sweep's LOCK_TABLE_NAME another table", [
            lambda t: t["Resources"][SWEEP]["Properties"]["Environment"]["Variables"].update(
                {TABLE_ENV: "some-other-table"})],
         "table", (SWEEP, TABLE_ENV)),
    ]
    for label, changes, rule, words in cases:
        try:
            broken_template, broken_sources = _apply(template, sources, changes)
            source_only = all(isinstance(change, _Edit) for change in changes)
            expanded = shipped_expanded if source_only else transform(broken_template)
            found = [p for p in problems(broken_template, broken_sources, expanded) if p not in shipped]
        except (SourceError, TemplateError, AssertionError) as error:
            expect(False, f"{rule} reports {label}", error)
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        expect(bool(hits), f"{rule} reports {label}", hits[0] if hits else f"not reported; found {found}")

    # A renamed or reshaped construct stops the check instead of turning it off.
    unreadable = [
        ("the entry method acquire_with_limit renamed in the store",
         [_Edit(STORE_RS, r"async fn acquire_with_limit\(", "async fn acquire_limited(")]),
        ("the sweep's release_granted_before renamed in the store",
         [_Edit(STORE_RS, r"async fn release_granted_before\(", "async fn release_before(")]),
        ("release-lock's store call renamed in lock.rs", [_Edit(LOCK_RS, r"\.release_with_limit\(", ".release_hinted(")]),
        ("release-lock's Locker::release calling another store method",
         [_Edit(LOCK_RS, r"\.release_with_limit\(&request\.lock_name, &request\.owner, request\.limit, now\)",
                ".release_granted_before(&request.lock_name, &request.owner, now, now)")]),
        ("a new Locker method calling the store", [_Edit(
            LOCK_RS, r"(impl<S: LockStore> Locker<S> \{)",
            r"\g<1>\n    pub async fn held(&self, owner: &Owner) { let _ = self.store.locks_held_by(owner).await; }\n")]),
        ("handle_acquire no longer calling answer_within",
         [_Edit(LAMBDA_RS, r"\.answer_within\(payload", ".answer_bounded(payload")]),
        ("SfnWaker calling SendTaskFailure instead", [_Edit(
            QUEUE_RS, r"\.send_task_success\(\)", ".send_task_failure()")]),
        ("a second Wake implementation outside tests", [_Edit(
            QUEUE_RS, r"(impl Wake for SfnWaker)", "impl Wake for OtherWaker { }\n\\g<1>")]),
        ("the acquire binary no longer running handle_acquire",
         [_Edit("crates/acquire-lock/src/main.rs", r"handle_acquire\(&locker", "handle_take(&locker")]),
        ("a store method calling a method this check cannot find",
         [_insert_into(STORE_RS, "release_any", "self.forget_marker(lock_name);")]),
        ("the owner index named by an expression",
         [_Edit(STORE_RS, r"\.index_name\(OWNER_INDEX\)", ".index_name(format!(\"owner-{}\", 1))")]),
        ("the owner index from a constant that is not there",
         [_Edit(STORE_RS, r"\.index_name\(OWNER_INDEX\)", ".index_name(OWNER_INDEX_V2)")]),
        ("a transaction (authorised per item action)",
         [_insert_into(PERMIT_WRITES_RS, "put_marker", "let _ = self.client.transact_write_items().send().await;")]),
        ("the client passed out of DynamoStore",
         [_insert_into(PERMIT_WRITES_RS, "put_marker", "helper(&self.client);")]),
        ("the reconciler calling a store method this check does not follow",
         [_Edit(RECONCILE_RS, r"(pub async fn reconcile_within\()",
                r"async fn stray<S: LockStore>(store: &S) { let _ = store.acquire_or_queue(); }\n    \g<1>")]),
        ("handle_sweep no longer calling reconcile_within",
         [_Edit(LAMBDA_RS, r"\.reconcile_within\(", ".reconcile_bounded(")]),
        ("a DynamoDB call in cleanup.rs", [_Edit(CLEANUP_RS, r"(async fn release_all<S: LockStore>\()",
                                                 r"fn stray(c: &Client) { c.put_item(); }\n\g<1>")]),
        ("the sweep function building another binary", [
            lambda t: t["Resources"][SWEEP]["Metadata"]["BuildProperties"].update(Binary="sweep")]),
    ]
    for label, changes in unreadable:
        try:
            broken_template, broken_sources = _apply(template, sources, changes)
            problems(broken_template, broken_sources, shipped_expanded)
            expect(False, f"stops on {label}", "read on regardless")
        except SourceError as error:
            expect(True, f"stops on {label}", error)
        except (AssertionError, TemplateError) as error:
            expect(False, f"stops on {label}", error)

    # Every store, on the template as written (all_problems specializes it per store).
    shipped_all = all_problems(raw, sources)
    expect(not shipped_all, "the shipped template, every store", shipped_all or "no problem")
    s3_objects = _store_statement(ACQUIRE, "UseS3Store", "ReadAndWriteLockObjects")
    sweep_list = _store_statement(SWEEP, "UseS3Store", "ListTheLockBucket")
    s3_rs, ssm_rs = f"{SRC}/s3.rs", f"{SRC}/ssm.rs"
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
        ("an S3 call no function may make (s3.rs)", [_prepend(
            s3_rs, "async fn stray(client: &aws_sdk_s3::Client) { let _ = client.delete_objects().send().await; }"),
            lambda t: [_store_statement(f, "UseS3Store", "ReleaseLockObjects")(t).update(
                Action=["s3:GetObject", "s3:PutObject"]) for f in (RELEASE, SWEEP)]],
         "missing", ("LockStore=s3", "s3:DeleteObject", "no lock function")),
        ("an S3 operation this check cannot map (s3.rs)", [_prepend(
            s3_rs, "async fn stray(client: &aws_sdk_s3::Client) { let _ = client.copy_object().send().await; }")],
         "unreadable", ("LockStore=s3", "client.copy_object()")),
        ("an SSM call no function may make (ssm.rs)", [_prepend(
            ssm_rs, "async fn stray(client: &aws_sdk_ssm::Client) { let _ = client.get_parameter_history().send().await; }")],
         "missing", ("LockStore=ssm", "ssm:GetParameterHistory", "no lock function")),
        ("ssm:DeleteParameter for acquire, which deletes in batches only", [lambda t: _store_statement(
            ACQUIRE, "UseSsmStore", "ReadAndWriteLockParameters")(t)["Action"].append("ssm:DeleteParameter")],
         "extra", ("LockStore=ssm", ACQUIRE, "ssm:DeleteParameter")),
    ]
    for label, changes, rule, words in stores_cases:
        try:
            broken_template, broken_sources = _apply(raw, sources, changes)
            found = [p for p in all_problems(broken_template, broken_sources) if p not in shipped_all]
        except (SourceError, TemplateError, AssertionError, KeyError) as error:
            expect(False, f"{rule} reports {label}", error)
            continue
        hits = [message for r, message in found if r == rule and all(word in message for word in words)]
        expect(bool(hits), f"{rule} reports {label}", hits[0] if hits else f"not reported; found {found}")

    total = 2 + len(cases) + len(unreadable) + len(stores_cases)
    print(f"function permissions self-test: {'all' if not failures else f'{failures} of'} {total} cases "
          f"{'as expected' if not failures else 'NOT as expected'}")
    return 1 if failures else 0


def main() -> int:
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test(load(ROOT / "template.yaml"), read_sources())
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(args[0])
    template = load(path)
    try:
        sources = read_sources(path.resolve().parent)
        lines = report(specialize(template, {STORE_PARAMETER: "dynamodb"}), sources)
        for store in STORE_GRANTS:
            calls, _ = store_calls(sources, store)
            lines.append(f"the {store} store's code ({STORE_SDK[store]}) calls "
                         + (", ".join(f"{action} ({', '.join(sites)})" for action, sites in sorted(calls.items()))
                            or "nothing this check found: only STORE_GRANTS is checked"))
        found = all_problems(template, sources)
    except SourceError as error:
        print(f"function permissions: cannot read the code: {error}")
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
