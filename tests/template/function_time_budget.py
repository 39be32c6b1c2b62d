"""Each lock function's worst case of SDK time, from the Rust code, against its
Lambda Timeout in template.yaml (issue 9, "Function time budget").

The store-down test cannot see this: locally nothing times out the way Lambda
does. On AWS, a function whose calls outlast its Timeout either times out
(Sandbox.Timedout) or, under the deadline guard (crates/sfn-lock/src/deadline.rs),
answers LockStoreUnavailable at Timeout - ANSWER_MARGIN with a store call cut
short: a "maybe" (the write may have landed) instead of the SDK's own answer.
This check keeps the SDK's own bounds inside the function's time.

One SDK call (every client is built from `sdk_config()` in lambda.rs; the queue's
SendTaskSuccess from `waker_client()`, the same settings with the SDK's retries off, repeated
by SfnWaker itself: WAKE_ATTEMPTS single attempts with WAKE_PAUSE x n between them)
    attempts x attempt timeout + the pauses between attempts, or the operation
    timeout if the code sets one, whichever is smaller: the operation timeout
    bounds the whole call, its retries and pauses included.
The pauses (standard retry, aws-smithy-runtime 1.16.2 as Cargo.lock pins it;
sources beside SDK_DEFAULT_MAX_BACKOFF_SECONDS below): before attempt n+1, min(initial_backoff x 2^(n-1),
max_backoff) x a full jitter in [0, 1); but a server's x-amz-retry-after is
honoured up to max_backoff, so the worst pause is max_backoff (and, under retry
behaviour 2.1, up to 5 s more than the jittered pause). Defaults 1 s and 20 s
unless the code sets them (`with_initial_backoff`, `with_max_backoff`).

A function's calls, per path (ACQUIRE_PATHS, RELEASE_PATHS, SWEEP_RECORD_PATHS
below; CODE_SHAPE holds each path to the code: a call it names that is no longer
where it was stops the check)
    acquire-lock              one round of its loop must fit: its first write, one
                              follow-up (renew, prune, join the queue), and for a
                              queued caller its waiter item before and the
                              SendTaskSuccess that wakes its own task. A further
                              round runs only when the lock changed hands between
                              our writes, and a hand-off to other waiters (room
                              owed to the queue) is their work: the deadline guard
                              cuts those short with LockStoreUnavailable, a
                              "maybe" the ASL retries (reported, not required).
    release-lock              the writes of one release and its first hand-off to
                              the oldest waiter (read its item, grant it, wake it);
                              each further hand-off (the previous waiter's task had
                              ended), up to MAX_HAND_OFFS per call, is cut by the
                              deadline guard and a retried release goes on.
    release-execution-locks   bounded per invocation by the deadline guard: every
                              SQS record runs under `within(left, ...)`, and a record
                              it cannot finish is reported alone for redelivery.
                              Checked: one call fits, and so does one record of the
                              largest ordinary shape (below), so that a record does
                              not fail on every delivery for lack of time.

Time kept back from the Timeout
    ANSWER_MARGIN (deadline.rs): the guard stops the work that long before the
    deadline, to answer in.
    COLD_START_MARGIN_SECONDS (below).

Rules
    sdk-bounded        some timeout bounds every call (otherwise nothing fits)
    deadline-guards    release runs under within_deadline, acquire under
                       answer_within(budget(&event.context)); the sweep
                       takes budget(&event.context) and runs each record under within()
    <function>         its calls' worst case + the margins fit in its Timeout

The numbers come from the Rust source by regex on named constants and builder
calls; one that cannot be found stops the check with an error (a rename must not
turn it off).

Usage: function_time_budget.py template.yaml | function_time_budget.py --self-test
"""

from __future__ import annotations

import copy
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
SRC = "crates/sfn-lock/src"
LAMBDA_RS, DYNAMODB_RS, DEADLINE_RS, CLEANUP_RS = (f"{SRC}/{name}" for name in
                                                     ("lambda.rs", "dynamodb.rs", "deadline.rs", "cleanup.rs"))
STORE_RS, PERMIT_WRITES_RS = f"{SRC}/dynamodb_store.rs", f"{SRC}/dynamodb_permit_writes.rs"
HANDOFF_RS, QUEUED_RS = f"{SRC}/dynamodb_handoff.rs", f"{SRC}/dynamodb_queued.rs"
QUEUE_RS = f"{SRC}/queue.rs"
RECONCILE_RS = f"{SRC}/reconcile.rs"

# The SDK's standard retry, where the code does not set its own values. Read in the
# crates at the versions Cargo.lock pins (aws-smithy-types 1.9.3, aws-smithy-runtime
# 1.16.2, aws-config 1.13.0), file by file as named here, and in their docs:
# - RetryConfig::standard(): max_attempts 3, initial_backoff 1 s, max_backoff 20 s
#   (aws-smithy-types src/retry.rs; https://docs.rs/aws-config/1.10.1/aws_config/retry/struct.RetryConfig.html,
#   with_initial_backoff: "the default duration of 1 second").
# - StandardRetryStrategy::calculate_backoff / calculate_exponential_backoff
#   (aws-smithy-runtime src/client/retries/strategy/standard.rs): the pause before
#   attempt n+1 is min(initial x 2^(n-1), max_backoff) x fastrand::f64() (full
#   jitter, [0, 1)); a server's x-amz-retry-after is used instead, capped at
#   max_backoff (retry behaviour 2.0, the default) or clamped to [t_i, t_i + 5 s]
#   (2.1, opted into with AWS_NEW_RETRIES_2026=true: aws-config
#   src/default_provider/retry_config.rs).
# - operation_timeout: "a limit on the total amount of time it takes for an
#   operation to be fully serviced, including the time for all retries"
#   (https://docs.rs/aws-config/1.9.0/aws_config/timeout/struct.OperationTimeoutConfig.html); the orchestrator
#   (aws-smithy-runtime src/client/orchestrator.rs) runs the whole retry loop, its
#   sleeps included, inside it, and each attempt (connecting included) inside the
#   attempt timeout.
SDK_DEFAULT_INITIAL_BACKOFF_SECONDS = 1.0
SDK_DEFAULT_MAX_BACKOFF_SECONDS = 20.0
RETRY_AFTER_SLACK_SECONDS = 5.0  # retry behaviour 2.1: x-amz-retry-after up to t_i + 5 s

# Lambda's default Timeout when neither the function nor Globals sets one.
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3.0

# Init that can land inside an invocation, against its Timeout. Normally the Init
# phase runs before the invocation, outside the Timeout (up to 10 s); but when Init
# fails or times out, and after a crash or a timeout, Lambda runs it again inside
# the next invocation, under the function's Timeout ("Lambda retries the Init phase
# at the time of the first function invocation with the configured function
# timeout", https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html).
# These functions' Init is the Rust bootstrap, logging setup and sdk_config(), which
# reads region and credentials from the environment with no network call: tens of
# milliseconds, even on the small CPU share of 128 MB. 1 s leaves room for a slow
# host. The first call's DNS and TLS handshake are not in it: they happen inside
# the attempt, under the attempt timeout. An Init that itself took its full 10 s is
# not covered; the deadline guard then answers before the Timeout.
COLD_START_MARGIN_SECONDS = 1.0

# The sweep's SDK calls for one SQS record, per path through Sweeper::handle
# (cleanup.rs; the paths exclude one another: a record is released, deferred or
# skipped). "The largest ordinary shape": the attach variant's first run, its child
# still running (DescribeExecution of both, StopExecution of the child), and one
# lock, found on one Query page. More locks, more pages or redriven runs take more
# calls; such a record may need more than one delivery, each releasing what it can
# (releases are conditional, and the owner index then lists fewer locks).
SWEEP_RECORD_PATHS = {
    "released, one lock": ["DescribeExecution", "Query owner-index", "UpdateItem"],
    # The marker names the lock; the mutex-format write misses, the permit's lands.
    "released, one semaphore permit": ["DescribeExecution", "Query owner-index", "GetItem (marker)",
                                       "UpdateItem (mutex, misses)", "UpdateItem (permit)", "DeleteItem (marker)"],
    "deferred (an early event back to the queue)": ["DescribeExecution", "SendMessage"],
    "attach variant, child stopped, one lock": [
        "DescribeExecution", "DescribeExecution (child)", "StopExecution (child)", "Query owner-index", "UpdateItem"],
    "attach variant, child stopped, deferred": [
        "DescribeExecution", "DescribeExecution (child)", "StopExecution (child)", "SendMessage"],
}

# The fair queue (issue 11). WAKE is one SendTaskSuccess (the waker's client: one
# attempt); every other call is a DynamoDB call. One hand-off (pump,
# dynamodb_handoff.rs): the oldest waiter's item read, the conditional write that
# makes it the holder (and takes it off the queue), then SendTaskSuccess.
WAKE = "SendTaskSuccess"
HAND_OFF = ["GetItem (the oldest waiter)", "UpdateItem (grant it)", WAKE]
# A further hand-off, after the previous waiter's task had ended: its grant taken back.
NEXT_HAND_OFF = HAND_OFF + ["UpdateItem (take the grant back)"]

# acquire-lock, one round (dynamodb_store.rs acquire_with_limit / acquire_core,
# dynamodb_queued.rs acquire_queued and join_queue).
ACQUIRE_PATHS = {
    "a semaphore's round: marker, grant refused, renew or prune":
        ["PutItem (marker)", "UpdateItem (grant, refused)", "UpdateItem (renew or prune)"],
    "queued: joins the queue": ["PutItem (waiter item)", "UpdateItem (grant, refused)", "UpdateItem (enqueue)"],
    "queued: granted at once, its task woken": ["PutItem (waiter item)", "UpdateItem (grant)", WAKE],
    "queued: a retried task renews and is woken":
        ["PutItem (waiter item)", "UpdateItem (grant, refused)", "UpdateItem (renew)", WAKE],
}
# Reported, cut by the deadline guard when it does not fit: room the queue is owed
# (an expired holder, a hand-off cut short) goes to the oldest waiter first.
ACQUIRE_HAND_OFF = ["PutItem (marker or waiter item)", "UpdateItem (grant, refused)", *HAND_OFF,
                    "UpdateItem (enqueue)"]

# release-lock (dynamodb_store.rs release_any): the release, leaving the queue,
# the first hand-off.
RELEASE_PATHS = {
    "released, handed to the oldest waiter": ["UpdateItem (release)", *HAND_OFF],
    "released in the other format than its hint (a permit, its marker deleted), handed over":
        ["UpdateItem (release, misses)", "UpdateItem (release)", "DeleteItem (marker)", *HAND_OFF],
    "a wait that ran out: not held, off the queue, the oldest waiter checked":
        ["UpdateItem (release: not held)", "UpdateItem (drop the queue entry)", "DeleteItem (waiter item)",
         "GetItem (the oldest waiter)"],
}
SWEEP_RECORD_PATHS.update({
    "released, one lock, handed to the oldest waiter":
        ["DescribeExecution", "Query owner-index", "UpdateItem", *HAND_OFF],
    # owner-index lists the waiter item, which names the lock; the release finds
    # nothing held, then the entry goes if it was queued before the end.
    "an ended waiter's queue entry removed": [
        "DescribeExecution", "Query owner-index", "GetItem (waiter item)", "UpdateItem (release: not held)",
        "GetItem (queued before the end?)", "UpdateItem (drop the queue entry)", "DeleteItem (waiter item)",
        "GetItem (the oldest waiter)"],
})

# (file, fn, pattern): where the queue's paths make their calls; a call not found
# where it was means the paths above need a new look.
_GRANT = r"\bself\s*\.\s*(?:grant|grant_permit)\s*\("
_LOOP = r"while\s+lost_rounds\s*<\s*MAX_ACQUIRE_ROUNDS\s*\{"
CODE_SHAPE = [
    (STORE_RS, "acquire_with_limit", r"\bself\s*\.\s*put_marker\s*\(", "a semaphore acquire's marker"),
    (STORE_RS, "acquire_core", _LOOP, "acquire's rounds, bounded by MAX_ACQUIRE_ROUNDS"),
    (STORE_RS, "acquire_core", _GRANT, "a round's first write"),
    (STORE_RS, "acquire_core", r"\bself\s*\.\s*(?:renew|renew_permit|prune)\s*\(", "a round's follow-up write"),
    (STORE_RS, "refused", r"\bself\s*\.\s*join_queue\s*\(", "a queued caller joining the queue"),
    (STORE_RS, "acquire_core", r"\bself\s*\.\s*pump\s*\(", "room owed to the queue handed over"),
    (QUEUED_RS, "acquire_queued", r"\bself\s*\.\s*put_waiter\s*\(", "a queued acquire's waiter item"),
    (QUEUED_RS, "acquire_queued", r"\bwaker\s*\.\s*wake\s*\(", "a queued acquire waking its own task"),
    (QUEUED_RS, "join_queue", r"\bself\s*\.\s*enqueue\s*\(", "the enqueue write"),
    (QUEUED_RS, "leave_queue", r"\bself\s*\.\s*drop_entry\s*\(", "leaving the queue"),
    (QUEUED_RS, "leave_queue", r"\bself\s*\.\s*delete_waiter\s*\(", "the waiter item deleted"),
    (QUEUED_RS, "leave_queue", r"\bself\s*\.\s*read_waiter\s*\(", "the sweep's queued-before-the-end read"),
    (HANDOFF_RS, "pump", r"\bfor\s+_\s+in\s+0\s*\.\.\s*MAX_HAND_OFFS\b", "hand-offs, bounded by MAX_HAND_OFFS"),
    (HANDOFF_RS, "pump", r"\bself\s*\.\s*read_waiter\s*\(", "a hand-off's read"),
    (HANDOFF_RS, "pump", _GRANT, "a hand-off's grant"),
    (HANDOFF_RS, "pump", r"\bwaker\s*\.\s*wake\s*\(", "a hand-off's SendTaskSuccess"),
    (HANDOFF_RS, "pump", r"\bself\s*\.\s*take_back\s*\(", "a dead waiter's grant taken back"),
    (STORE_RS, "release_any", r"\bself\s*\.\s*(?:release_mutex|release_permit)\s*\(", "the release write"),
    (STORE_RS, "release_any", r"\bself\s*\.\s*leave_queue\s*\(", "a release leaving the queue"),
    (STORE_RS, "release_any", r"\bself\s*\.\s*pump\s*\(", "a release's hand-off"),
    (PERMIT_WRITES_RS, "release_permit", r"\bself\s*\.\s*delete_marker\s*\(", "a permit's marker deleted"),
]

# Where cleanup.rs makes each of those calls; one not found means the paths above
# need a new look.
SWEEP_CALLS = {
    "DescribeExecution": r"self\s*\.\s*executions\s*\.\s*describe\(",
    "StopExecution": r"self\s*\.\s*executions\s*\.\s*stop\(",
    "Query owner-index": r"\.\s*locks_held_by\(",
    "UpdateItem": r"\.\s*release_granted_before\(",
    "SendMessage": r"requeue\s*\.\s*requeue\(",
}

FUNCTIONS = {  # the rule's name: the binary (Metadata.BuildProperties.Binary)
    "acquire-lock": "acquire-lock",
    "release-lock": "release-lock",
    "release-execution-locks": "release-execution-locks",
}

Sources = dict[str, str]  # repository-relative path -> text
Problem = tuple[str, str]  # (rule, message)


class SourceError(Exception):
    """A number or a construct this check reads is not where it was: fix the check."""


# -- reading the Rust source ------------------------------------------------------------
# A string literal (escapes and line continuations included) or a line comment,
# whichever starts first: a "//" inside a string is not a comment.
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*', re.S)


def _code(text: str) -> str:
    """The text without comments and string literals (their braces and words)."""
    return _STRING_OR_COMMENT.sub(lambda match: '""' if match.group().startswith('"') else "", text)


def _block(text: str, head: str, where: str) -> str:
    """The brace-balanced body after the first match of `head` (a regex)."""
    code = _code(text)
    match = re.search(head, code)
    if not match:
        raise SourceError(f"{where}: no {head!r}")
    start = code.index("{", match.end() - 1)
    depth = 0
    for position in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[position], 0)
        if depth == 0:
            return code[start + 1:position]
    raise SourceError(f"{where}: unbalanced braces after {head!r}")


def _duration(expression: str, where: str) -> float:
    match = re.fullmatch(r"\s*Duration::from_(secs|millis|secs_f64|secs_f32)\(\s*([0-9_.]+)\s*\)\s*", expression)
    if not match:
        raise SourceError(f"{where}: cannot read the duration {expression.strip()!r}")
    value = float(match.group(2).replace("_", ""))
    return value / 1000 if match.group(1) == "millis" else value


def _arguments(body: str, method: str) -> list[str]:
    """The argument text of every `.method(...)` call in `body` (balanced parentheses)."""
    found = []
    for match in re.finditer(rf"\.\s*{method}\s*\(", body):
        depth, position = 1, match.end()
        while depth and position < len(body):
            depth += {"(": 1, ")": -1}.get(body[position], 0)
            position += 1
        found.append(body[match.end():position - 1].strip())
    return found


def _value(argument: str, text: str, where: str) -> str:
    """A literal, or the value of the named constant it is."""
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", argument):
        return _constant(text, argument, where).strip()
    return argument


def _optional_duration(body: str, text: str, method: str, where: str) -> float | None:
    found = _arguments(body, method)
    if len(found) > 1:
        raise SourceError(f"{where}: {method} is set {len(found)} times")
    return _duration(_value(found[0], text, where), f"{where}: {method}") if found else None


def _constant(text: str, name: str, where: str) -> str:
    found = re.findall(rf"\bconst\s+{name}\s*:\s*[A-Za-z0-9_]+\s*=\s*([^;]+);", _code(text))
    if len(found) != 1:
        raise SourceError(f"{where}: {'no' if not found else len(found)} `const {name}`")
    return found[0]


@dataclass(frozen=True)
class Sdk:
    """What sdk_config() sets, with the SDK's defaults where it sets nothing."""
    attempts: int
    attempt_timeout: float | None
    operation_timeout: float | None
    connect_timeout: float | None
    initial_backoff: float
    max_backoff: float

    def pauses(self) -> list[float]:
        """The worst pause before each retry: max_backoff when the server asks for
        it, or the (2.1) jittered pause plus its slack, whichever is longer."""
        return [max(self.max_backoff, self.jittered(n) + RETRY_AFTER_SLACK_SECONDS) for n in range(1, self.attempts)]

    def jittered(self, n: int) -> float:
        """The longest pause full jitter gives before attempt n+1, with no server hint."""
        return min(self.initial_backoff * 2 ** (n - 1), self.max_backoff)

    def retry_loop(self) -> float:
        attempt = math.inf if self.attempt_timeout is None else self.attempt_timeout
        return self.attempts * attempt + sum(self.pauses())

    def call(self) -> float:
        """One call's worst case."""
        operation = math.inf if self.operation_timeout is None else self.operation_timeout
        return min(operation, self.retry_loop())

    def describe(self) -> str:
        attempt = "unbounded" if self.attempt_timeout is None else f"{self.attempt_timeout:g} s"
        loop = (f"{self.attempts} attempts x {attempt} + pauses "
                f"{' + '.join(f'{p:g}' for p in self.pauses()) or '0'} s = {self.retry_loop():g} s "
                f"(without a server's retry-after: {' + '.join(f'{self.jittered(n):g}' for n in range(1, self.attempts)) or '0'} s)")
        operation = "none" if self.operation_timeout is None else f"{self.operation_timeout:g} s"
        return f"one call <= {self.call():g} s: operation timeout {operation}; {loop}"


def sdk_settings(sources: Sources) -> Sdk:
    where = f"{LAMBDA_RS} sdk_config_with()"
    loader = r"aws_config::(defaults|load_from_env|load_defaults|from_env)\b"
    loaders = [path for path, text in sources.items() for _ in re.finditer(loader, _code(text))]
    if loaders != [LAMBDA_RS]:
        raise SourceError(f"the SDK configuration is loaded in {loaders or 'no file'}, not once in {LAMBDA_RS}'s "
                          "sdk_config(): this check reads that one")
    # sdk_config() and try_sdk_config() differ only in the HTTPS client they
    # pass (src/https.rs); the settings are sdk_config_with()'s.
    body = _block(sources[LAMBDA_RS], r"\bfn\s+sdk_config_with\s*\(", LAMBDA_RS)
    if "aws_config::defaults" not in body:
        raise SourceError(f"{where}: does not load the SDK configuration")
    for needed in (r"\.timeout_config\(", r"TimeoutConfig::builder\(\)", r"\.retry_config\("):
        if not re.search(needed, body):
            raise SourceError(f"{where}: no {needed.replace(chr(92), '')}")
    if not re.search(r"RetryConfig::standard\(\)", body):
        raise SourceError(f"{where}: not RetryConfig::standard(); this check knows the standard retry only")
    text = sources[LAMBDA_RS]
    attempts = _arguments(body, "with_max_attempts")
    if len(attempts) != 1:
        raise SourceError(f"{where}: {len(attempts)} with_max_attempts(N), not one")
    count = _value(attempts[0], text, where)
    if not re.fullmatch(r"[0-9_]+(u32)?", count):
        raise SourceError(f"{where}: cannot read with_max_attempts({attempts[0]})")
    initial_backoff = _optional_duration(body, text, "with_initial_backoff", where)
    max_backoff = _optional_duration(body, text, "with_max_backoff", where)
    sdk = Sdk(
        attempts=int(count.removesuffix("u32").replace("_", "")),
        attempt_timeout=_optional_duration(body, text, "operation_attempt_timeout", where),
        operation_timeout=_optional_duration(body, text, "operation_timeout", where),
        connect_timeout=_optional_duration(body, text, "connect_timeout", where),
        initial_backoff=SDK_DEFAULT_INITIAL_BACKOFF_SECONDS if initial_backoff is None else initial_backoff,
        max_backoff=SDK_DEFAULT_MAX_BACKOFF_SECONDS if max_backoff is None else max_backoff,
    )
    if sdk.attempts < 1:
        raise SourceError(f"{where}: with_max_attempts({sdk.attempts})")
    return sdk


def code_shape(sources: Sources) -> tuple[int, int]:
    """(MAX_ACQUIRE_ROUNDS, MAX_HAND_OFFS), once every call of CODE_SHAPE is where it was."""
    for path, function, pattern, what in CODE_SHAPE:
        if path not in sources:
            raise SourceError(f"no {path}: review the paths ({what})")
        body = _block(sources[path], rf"\bfn\s+{function}\s*[<(]", path)
        if not re.search(pattern, body):
            raise SourceError(f"{path}: {function} no longer makes {what} ({pattern}): review the paths")
    rounds = int(_constant(sources[DYNAMODB_RS], "MAX_ACQUIRE_ROUNDS", DYNAMODB_RS).replace("_", ""))
    hand_offs = int(_constant(sources[HANDOFF_RS], "MAX_HAND_OFFS", HANDOFF_RS).replace("_", ""))
    return rounds, hand_offs


def waker_cost(sources: Sources, sdk: Sdk) -> float:
    """One wake-up's worst case: SfnWaker's own loop of WAKE_ATTEMPTS SendTaskSuccess
    calls (queue.rs), each one attempt of the waker's client (sdk_config()'s
    timeouts, retries off: waker_client), with a pause of WAKE_PAUSE x n before
    attempt n."""
    body = _block(sources[LAMBDA_RS], r"\bfn\s+waker_client\s*\(", LAMBDA_RS)
    if not re.search(r"RetryConfig::disabled\(\)", body) or re.search(r"\.timeout_config\(", body):
        raise SourceError(f"{LAMBDA_RS} waker_client(): not sdk_config()'s timeouts with RetryConfig::disabled(); "
                          "this check prices each SendTaskSuccess as one attempt")
    attempts = int(_constant(sources[QUEUE_RS], "WAKE_ATTEMPTS", QUEUE_RS).replace("_", ""))
    pause = _duration(_constant(sources[QUEUE_RS], "WAKE_PAUSE", QUEUE_RS), f"{QUEUE_RS}: WAKE_PAUSE")
    one = Sdk(1, sdk.attempt_timeout, sdk.operation_timeout, sdk.connect_timeout, sdk.initial_backoff,
              sdk.max_backoff).call()
    return attempts * one + sum(pause * n for n in range(2, attempts + 1))


def sweep_calls_found(sources: Sources) -> None:
    code = _code(sources[CLEANUP_RS])
    missing = [name for name, pattern in SWEEP_CALLS.items() if not re.search(pattern, code)]
    if missing:
        raise SourceError(f"{CLEANUP_RS}: the sweep no longer calls {missing} where this check looks: "
                          "review SWEEP_RECORD_PATHS")


def answer_margin(sources: Sources) -> float:
    return _duration(_constant(sources[DEADLINE_RS], "ANSWER_MARGIN", DEADLINE_RS), f"{DEADLINE_RS}: ANSWER_MARGIN")


# -- the template -----------------------------------------------------------------------
def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def function_timeout(template: dict, binary: str) -> tuple[float | None, str]:
    """(the shortest Timeout the function can have, where that comes from)."""
    found = [
        (name, resource) for name, resource in (template.get("Resources", {}) or {}).items()
        if resource.get("Type") == "AWS::Serverless::Function"
        and ((resource.get("Metadata", {}) or {}).get("BuildProperties", {}) or {}).get("Binary") == binary
    ]
    if len(found) != 1:
        raise SourceError(f"template: {len(found)} functions build {binary!r}, not one")
    name, resource = found[0]
    timeout = (resource.get("Properties", {}) or {}).get("Timeout")
    source = f"{name}.Timeout"
    if timeout is None:
        timeout = ((template.get("Globals", {}) or {}).get("Function", {}) or {}).get("Timeout")
        source = "Globals.Function.Timeout"
    if timeout is None:
        return LAMBDA_DEFAULT_TIMEOUT_SECONDS, "Lambda's default (neither the function nor Globals sets one)"
    if isinstance(timeout, dict) and set(timeout) == {"Ref"}:
        spec = (template.get("Parameters", {}) or {}).get(timeout["Ref"], {}) or {}
        return _number(spec.get("MinValue")), f"{source} = !Ref {timeout['Ref']}, at its MinValue"
    return _number(timeout), source


# -- the rules --------------------------------------------------------------------------
def deadline_guards(sources: Sources) -> list[str]:
    found = []
    handlers = _code(sources[LAMBDA_RS])
    release = _block(handlers, r"\bfn\s+handle_release\s*\(", LAMBDA_RS)
    if not re.search(r"within_deadline\(\s*&event\.context\s*,\s*locker\.release\(", release):
        found.append("handle_release does not run locker.release under within_deadline: "
                     "a call past the Timeout times the function out")
    # acquire cuts its store call itself (Locker::acquire_within), so that a cut
    # inside a wait bound is waited out like any other store error.
    acquire = _block(handlers, r"\bfn\s+handle_acquire\s*\(", LAMBDA_RS)
    if not (re.search(r"budget\(\s*&event\.context\s*\)", acquire)
            and re.search(r"locker\s*\.(?:acquire_within|answer_within)\([^;]*\bbudget\b", acquire)):
        found.append("handle_acquire does not run locker.answer_within with budget(&event.context): "
                     "a call past the Timeout times the function out")
    if not re.search(r"budget\(\s*&event\.context\s*\)", _block(handlers, r"\bfn\s+handle_sweep\s*\(", LAMBDA_RS)):
        found.append("handle_sweep does not pass the invocation's budget(&event.context) to the sweep")
    if not re.search(r"within\(\s*left\s*,\s*self\.handle_record\(", _code(sources[CLEANUP_RS])):
        found.append("the sweep does not run each SQS record under within(left, ...): "
                     "a slow record times out the whole batch")
    # The reconciler (reconcile.rs): a run has no fixed number of calls (up to
    # MAX_RECONCILE_LOCKS holders and MAX_RECONCILE_QUEUES queues), so no path
    # is priced: the invocation's budget bounds it, each execution and each
    # queue under what is left of it.
    sweep = _block(handlers, r"\bfn\s+handle_sweep\s*\(", LAMBDA_RS)
    if not re.search(r"reconcile_within\([^;]*budget\(\s*&event\.context\s*\)", sweep):
        found.append("handle_sweep does not pass the invocation's budget(&event.context) to the reconciler")
    reconcile = _code(sources[RECONCILE_RS])
    for what, pattern in (("listing", r"within\(\s*time\s*,[^;]*\.list_held\("),
                          ("execution", r"within\(\s*time\s*,\s*judge\.execution_ended\("),
                          ("queue list", r"within\(\s*time\s*,[^;]*\.queues_to_wake\("),
                          ("queue", r"within\(\s*time\s*,[^;]*\.wake_queue\(")):
        if not re.search(pattern, reconcile):
            found.append(f"the reconciler does not run each {what} under within(time, ...): "
                         "one slow call times out the whole run")
    return found


@dataclass(frozen=True)
class Budget:
    function: str
    timeout: float | None
    timeout_source: str
    margins: float
    needs: list[tuple[str, float]]  # (what, seconds of SDK time)
    notes: tuple[tuple[str, float], ...] = ()  # reported only: cut by the deadline guard

    def problems(self) -> list[str]:
        if self.timeout is None:
            return [f"cannot read its Timeout ({self.timeout_source})"]
        available = self.timeout - self.margins
        return [f"{what} may take {seconds:g} s, more than the {available:g} s its "
                f"{self.timeout:g} s Timeout leaves after {self.margins:g} s of margins"
                for what, seconds in self.needs if seconds > available]


def budgets(template: dict, sources: Sources) -> tuple[Sdk, list[Budget]]:
    sdk = sdk_settings(sources)
    margins = answer_margin(sources) + COLD_START_MARGIN_SECONDS
    rounds, hand_offs = code_shape(sources)
    sweep_calls_found(sources)
    call, wake = sdk.call(), waker_cost(sources, sdk)

    def path(label: str, calls: list[str]) -> tuple[str, float]:
        woken = calls.count(WAKE)
        stored = len(calls) - woken
        priced = f"{stored} x {call:g} s" + (f" + {woken} {WAKE} x {wake:g} s" if woken else "")
        return f"{label} ({priced})", stored * call + woken * wake

    needs = {
        "acquire-lock": [path(f"one round, {label}", calls) for label, calls in ACQUIRE_PATHS.items()],
        "release-lock": [path(label, calls) for label, calls in RELEASE_PATHS.items()],
        "release-execution-locks": [("one call", call)] + [
            path(f"one record, {label}", calls) for label, calls in SWEEP_RECORD_PATHS.items()],
    }
    further = path(f"each further hand-off (up to {hand_offs} per call)", NEXT_HAND_OFF)
    notes = {
        "acquire-lock": (path("room owed to the queue, handed to the oldest waiter, then queued", ACQUIRE_HAND_OFF),
                         (f"rounds 2..{rounds} (the lock changed hands between our writes)", 0.0), further),
        "release-lock": (further,),
        "release-execution-locks": (further,),
    }
    found = []
    for function, binary in FUNCTIONS.items():
        timeout, source = function_timeout(template, binary)
        found.append(Budget(function, timeout, source, margins, needs[function], notes[function]))
    return sdk, found


def problems(template: dict, sources: Sources) -> list[Problem]:
    """Every rule's problems. SourceError if a number cannot be read."""
    sdk, found_budgets = budgets(template, sources)
    found: list[Problem] = []
    if math.isinf(sdk.call()):
        found.append(("sdk-bounded", f"{LAMBDA_RS}: neither an operation timeout nor an attempt timeout "
                                     "bounds a call"))
    found += [("deadline-guards", message) for message in deadline_guards(sources)]
    for budget in found_budgets:
        found += [(budget.function, message) for message in budget.problems()]
    return found


def report(template: dict, sources: Sources) -> list[str]:
    sdk, found_budgets = budgets(template, sources)
    margin = answer_margin(sources)
    lines = [f"SDK ({LAMBDA_RS} sdk_config): {sdk.describe()}",
             f"margins: ANSWER_MARGIN {margin:g} s ({DEADLINE_RS}) + cold start {COLD_START_MARGIN_SECONDS:g} s"]
    for budget in found_budgets:
        timeout = "?" if budget.timeout is None else f"{budget.timeout:g} s"
        available = "?" if budget.timeout is None else f"{budget.timeout - budget.margins:g} s"
        lines.append(f"{budget.function}: Timeout {timeout} ({budget.timeout_source}), {available} for SDK calls")
        for what, seconds in budget.needs:
            verdict = "fits" if budget.timeout is not None and seconds <= budget.timeout - budget.margins else "DOES NOT FIT"
            lines.append(f"    {what}: {seconds:g} s, {verdict}")
        for what, seconds in budget.notes:
            lines.append(f"    beyond: {what}" + (f": {seconds:g} s" if seconds else "") +
                         ", cut by the deadline guard (LockStoreUnavailable; a retried call goes on)")
    return lines


def read_sources(root: Path = ROOT) -> Sources:
    """Every Rust source file of the crates under `root` (the template's folder)."""
    sources = {str(path.relative_to(root)): path.read_text() for path in sorted((root / "crates").glob("*/src/**/*.rs"))}
    missing = [path for path in (LAMBDA_RS, DYNAMODB_RS, DEADLINE_RS, CLEANUP_RS, STORE_RS, PERMIT_WRITES_RS,
                                 HANDOFF_RS, QUEUED_RS, QUEUE_RS, RECONCILE_RS)
               if path not in sources]
    if missing:
        raise SourceError(f"{', '.join(missing)} not found under {root}")
    return sources


# -- self-test --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Edit:
    """A change to one source file's text (every other change is to the template):
    every `old` replaced, or with `pattern`, the one match of the regex `old`."""
    path: str
    old: str
    new: str
    pattern: bool = False

    def apply(self, sources: Sources) -> None:
        if self.pattern:
            text, count = re.subn(self.old, self.new, sources[self.path])
            if count != 1:
                raise AssertionError(f"self-test: {count} matches of {self.old!r} in {self.path}; update the case")
            sources[self.path] = text
        elif self.old in sources[self.path]:
            sources[self.path] = sources[self.path].replace(self.old, self.new)
        else:
            raise AssertionError(f"self-test: {self.old!r} is not in {self.path}; update the case")


# Where sdk_config() gets each setting a case may add.
_BUILDER = {"with_max_attempts": "RetryConfig::standard()", "with_max_backoff": "RetryConfig::standard()"}


@dataclass(frozen=True)
class _Sdk:
    """Sets `.method(argument)` in lambda.rs whatever it says now (None: removes it),
    so that the cases follow the shipped settings as they change."""
    method: str
    argument: str | None

    def apply(self, sources: Sources) -> None:
        text = sources[LAMBDA_RS]
        found = list(re.finditer(rf"\.\s*{self.method}\s*\(", text))
        if len(found) > 1:
            raise AssertionError(f"self-test: {self.method} is called {len(found)} times in {LAMBDA_RS}")
        if found:
            depth, end = 1, found[0].end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            start, replaced = found[0].start(), "" if self.argument is None else f".{self.method}({self.argument})"
            sources[LAMBDA_RS] = text[:start] + replaced + text[end:]
        elif self.argument is not None:
            anchor = _BUILDER.get(self.method, "TimeoutConfig::builder()")
            if text.count(anchor) != 1:
                raise AssertionError(f"self-test: no single {anchor} in {LAMBDA_RS} to add {self.method} to")
            sources[LAMBDA_RS] = text.replace(anchor, f"{anchor}.{self.method}({self.argument})")


def _const(path: str, name: str, value: str) -> _Edit:
    """Sets `const NAME: T = value;` in `path`, whatever its value now."""
    return _Edit(path, rf"(\bconst\s+{name}\s*:\s*[A-Za-z0-9_]+\s*=)[^;]+;", rf"\g<1> {value};", pattern=True)


def _secs(seconds: float) -> str:
    return f"Duration::from_millis({round(seconds * 1000)})"


def _timeout(resource: str, value: Any) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        properties = template["Resources"][resource]["Properties"]
        if value is None:
            properties.pop("Timeout")
        else:
            properties["Timeout"] = value
    return change


def _apply(template: dict, sources: Sources, changes: list) -> tuple[dict, Sources]:
    template, sources = copy.deepcopy(template), dict(sources)
    for change in changes:
        if isinstance(change, (_Edit, _Sdk)):
            change.apply(sources)
        else:
            change(template)
    return template, sources


def _lowered(template: dict, sources: Sources, changes: list, function: str) -> int:
    """One second less than the Timeout `function` needs after `changes` (at least 1)."""
    budget = next(b for b in budgets(*_apply(template, sources, changes))[1] if b.function == function)
    return max(1, math.ceil(max(seconds for _, seconds in budget.needs) + budget.margins) - 1)


def self_test(template: dict, sources: Sources) -> int:
    failures = 0

    def expect(ok: bool, label: str, detail: Any = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label}{': ' + str(detail) if detail != '' else ''}")

    # The arithmetic, on numbers worked out by hand.
    sdk = Sdk(attempts=3, attempt_timeout=2, operation_timeout=None, connect_timeout=1,
              initial_backoff=1, max_backoff=20)
    expect(sdk.retry_loop() == 3 * 2 + 20 + 20, "3 attempts of 2 s with 20 s pauses take 46 s", sdk.retry_loop())
    expect([sdk.jittered(n) for n in (1, 2)] == [1, 2], "full jitter pauses at most 1 s, then 2 s")
    expect(Sdk(3, 2, 5, 1, 1, 20).call() == 5, "an operation timeout of 5 s bounds the call")
    expect(Sdk(2, 1, None, None, 1, 0.5).call() == 1 + 1 + 0.5 + 5,
           "max_backoff 0.5 s: a 2.1 retry-after pause reaches 0.5 + 5 s", Sdk(2, 1, None, None, 1, 0.5).call())
    expect(math.isinf(Sdk(3, None, None, 1, 1, 20).call()), "no attempt or operation timeout: unbounded")

    # The shipped source must be readable: every number found.
    try:
        shipped = problems(template, sources)
        timeouts = {function: function_timeout(template, binary)[0] for function, binary in FUNCTIONS.items()}
        expect(True, "reads every number from the shipped source", report(template, sources)[0])
    except SourceError as error:
        expect(False, "reads every number from the shipped source", error)
        return 1

    # Each case: (label, rule, changes that make its function fit, changes that break it).
    # The first set, applied to the shipped source and template, is the control: it
    # must pass that rule. So each case shows the check flip from accepting to
    # rejecting, whatever the shipped numbers are (acquire's do not fit today).
    release_timeout = timeouts["release-lock"] or 10
    acquire_timeout = timeouts["acquire-lock"] or 10
    short_calls = [_Sdk("operation_timeout", _secs(0.1)), _Sdk("operation_attempt_timeout", _secs(0.1))]
    two_second_calls = [_Sdk("operation_timeout", _secs(2)), _Sdk("operation_attempt_timeout", _secs(2))]
    one_try = [_Sdk("operation_timeout", None), _Sdk("operation_attempt_timeout", _secs(2)),
               _Sdk("with_max_attempts", "1")]
    cases: list[tuple[str, str, list, list]] = [
        (f"the SDK's timeouts raised 0.1 s -> the function's {release_timeout:g} s", "release-lock", short_calls,
         [_Sdk("operation_timeout", _secs(release_timeout)), _Sdk("operation_attempt_timeout", _secs(release_timeout))]),
        ("the operation timeout removed (3 attempts x 2 s + 2 pauses)", "release-lock", short_calls,
         [_Sdk("operation_timeout", None), _Sdk("operation_attempt_timeout", _secs(2)), _Sdk("with_max_attempts", "3")]),
        (f"the SDK's timeouts raised to {release_timeout:g} s, in a named constant", "release-lock", short_calls,
         [_Sdk("operation_timeout", "OPERATION_TIMEOUT"), _Sdk("operation_attempt_timeout", "OPERATION_TIMEOUT"),
          _Edit(LAMBDA_RS, "pub async fn sdk_config()",
                f"const OPERATION_TIMEOUT: Duration = Duration::from_secs({math.ceil(release_timeout)});\n"
                "pub async fn sdk_config()")]),
        ("retries turned on (1 -> 2 attempts of 2 s and a pause) with no operation timeout", "release-lock",
         one_try, [_Sdk("with_max_attempts", "2")]),
        ("release-lock's Timeout lowered to 1 s below its need (2 s calls)", "release-lock", two_second_calls,
         [_timeout("ReleaseLockFunction", _lowered(template, sources, two_second_calls, "release-lock"))]),
        ("release-lock's Timeout removed (Lambda's default, 3 s) under 2 s calls", "release-lock", two_second_calls,
         [_timeout("ReleaseLockFunction", None)]),
        ("the sweep's Timeout lowered to 1 s below its largest record's need (2 s calls)", "release-execution-locks",
         two_second_calls,
         [_timeout("ReleaseExecutionLocksFunction", _lowered(template, sources, two_second_calls, "release-execution-locks"))]),
        ("the sweep's Timeout a parameter whose MinValue is 1", "release-execution-locks", short_calls,
         [_timeout("ReleaseExecutionLocksFunction", {"Ref": "WorkloadTimeoutSeconds"}),
          lambda template: template["Parameters"]["WorkloadTimeoutSeconds"].update(MinValue=1)]),
        (f"the SDK's timeouts raised 0.1 s -> {acquire_timeout:g} s", "acquire-lock", short_calls,
         [_Sdk("operation_timeout", _secs(acquire_timeout)), _Sdk("operation_attempt_timeout", _secs(acquire_timeout))]),
        ("acquire-lock's Timeout lowered to 1 s below its need (0.1 s calls)", "acquire-lock", short_calls,
         [_timeout("AcquireLockFunction", _lowered(template, sources, short_calls, "acquire-lock"))]),
        (f"ANSWER_MARGIN raised to the function's {acquire_timeout:g} s (0.1 s calls)", "acquire-lock", short_calls,
         [_const(DEADLINE_RS, "ANSWER_MARGIN", f"Duration::from_secs({math.ceil(acquire_timeout)})")]),
        ("handle_release without within_deadline", "deadline-guards", [],
         [_Edit(LAMBDA_RS, "within_deadline(&event.context, locker.release(payload, EpochMillis::now()))",
                "locker.release(payload, EpochMillis::now())")]),
        ("handle_acquire without its budget", "deadline-guards", [],
         [_Edit(LAMBDA_RS, ".answer_within(payload, EpochMillis::now(), budget)",
                ".answer_within(payload, EpochMillis::now(), None)")]),
        ("the sweep's records without within(left, ...)", "deadline-guards", [],
         [_Edit(CLEANUP_RS, "within(left, self.handle_record(record, now)).await",
                "self.handle_record(record, now).await")]),
        ("the reconciler's executions without within(time, ...)", "deadline-guards", [],
         [_Edit(RECONCILE_RS, "within(time, judge.execution_ended(&owner, now)).await",
                "judge.execution_ended(&owner, now).await")]),
        ("the reconciler without the invocation's budget", "deadline-guards", [],
         [_Edit(LAMBDA_RS, r"(\.reconcile_within\(\s*now,\s*)budget\(&event\.context\)",
                r"\g<1>None", pattern=True)]),
        ("neither an attempt nor an operation timeout", "sdk-bounded", [],
         [_Sdk("operation_timeout", None), _Sdk("operation_attempt_timeout", None)]),
    ]
    for label, rule, fit, breaks in cases:
        try:
            control = [m for r, m in problems(*_apply(template, sources, fit)) if r == rule]
            found = [m for r, m in problems(*_apply(template, sources, fit + breaks)) if r == rule]
        except SourceError as error:
            expect(False, f"{rule} rejects {label}", f"cannot read: {error}")
            continue
        except AssertionError as error:  # the source moved on: the case needs updating
            expect(False, f"{rule} rejects {label}", error)
            continue
        if control:
            expect(False, f"{rule} rejects {label}", f"its control already fails: {control[0]}")
        else:
            expect(bool(found), f"{rule} rejects {label}", found[0] if found else "accepted")

    # A renamed or reshaped number stops the check instead of turning it off.
    unreadable = [
        ("MAX_ACQUIRE_ROUNDS renamed", [_Edit(DYNAMODB_RS, "MAX_ACQUIRE_ROUNDS", "MAX_GRANT_ROUNDS")]),
        ("ANSWER_MARGIN renamed", [_Edit(DEADLINE_RS, "ANSWER_MARGIN", "REPLY_MARGIN")]),
        ("with_max_attempts dropped", [_Sdk("with_max_attempts", None)]),
        ("the operation timeout from a constant that is not there", [_Sdk("operation_timeout", "OPERATION_TIMEOUT")]),
        ("the operation timeout computed", [_Sdk("operation_timeout", "attempt * 3")]),
        ("sdk_config_with renamed", [_Edit(LAMBDA_RS, "fn sdk_config_with(", "fn shared_sdk_config_with(")]),
        ("a second SDK configuration elsewhere", [_Edit(CLEANUP_RS, "use std::time::Duration;",
                                                        "use std::time::Duration;\nfn other() { aws_config::defaults(x); }")]),
        ("the adaptive retry mode", [_Edit(LAMBDA_RS, "RetryConfig::standard()", "RetryConfig::adaptive()")]),
        ("the sweep's DescribeExecution calls renamed", [_Edit(CLEANUP_RS, "self.executions.describe(",
                                                               "self.executions.look_up(")]),
        ("acquire's loop not bounded by MAX_ACQUIRE_ROUNDS", [_Edit(STORE_RS, "while lost_rounds < MAX_ACQUIRE_ROUNDS {", "loop {")]),
        ("acquire's grant renamed", [_Edit(STORE_RS, "self.grant(", "self.take("),
                                     _Edit(STORE_RS, "self.grant_permit(", "self.take_permit(")]),
        ("release_any renamed", [_Edit(STORE_RS, "fn release_any(", "fn release_either(")]),
        ("MAX_HAND_OFFS renamed", [_Edit(HANDOFF_RS, "MAX_HAND_OFFS", "MAX_WAKES")]),
        ("the hand-offs not bounded by MAX_HAND_OFFS", [_Edit(HANDOFF_RS, "for _ in 0..MAX_HAND_OFFS {", "loop {")]),
        ("a release that no longer hands over", [_Edit(STORE_RS, "Box::pin(self.pump(lock_name, item, now)).await?;",
                                                      "let _ = (lock_name, item, now);")]),
        ("a queued acquire no longer waking its own task", [_Edit(QUEUED_RS, "waker.wake(token.as_str(), output)",
                                                                  "waker.notify(token.as_str(), output)")]),
        ("the waker's client retrying (SendTaskSuccess priced as one attempt)",
         [_Edit(LAMBDA_RS, ".retry_config(RetryConfig::disabled())", ".retry_config(RetryConfig::standard())")]),
        ("the sweep function not found", [lambda template: template["Resources"]["ReleaseExecutionLocksFunction"]
                                          ["Metadata"]["BuildProperties"].update(Binary="sweep")]),
    ]
    for label, changes in unreadable:
        try:
            problems(*_apply(template, sources, changes))
            expect(False, f"stops on {label}", "read on regardless")
        except SourceError as error:
            expect(True, f"stops on {label}", error)
        except AssertionError as error:
            expect(False, f"stops on {label}", error)

    total = len(cases) + len(unreadable)
    print(f"function time budget self-test: {'all' if not failures else f'{failures} of'} "
          f"{total} cases and the arithmetic {'as expected' if not failures else 'NOT as expected'}"
          f"{' (the shipped numbers: ' + str(len(shipped)) + ' problem(s), see the check itself)' if shipped else ''}")
    return 1 if failures else 0


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cfn_template import load

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
        found = problems(template, sources)
        lines = report(template, sources)
    except SourceError as error:
        print(f"function time budget: cannot read the numbers: {error}")
        return 1
    for line in lines:
        print(f"function time budget: {line}")
    for rule, message in found:
        print(f"function time budget: {rule}: {message}")
    print(f"function time budget: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
