"""Each lock function's worst case of SDK time, from the Rust code, against its
Lambda Timeout in template.yaml (issue 9, "Function time budget").

The store-down test cannot see this: locally nothing times out the way Lambda
does. On AWS, a function whose calls outlast its Timeout either times out
(Sandbox.Timedout) or, under the deadline guard, answers LockStoreUnavailable at
Timeout - ANSWER_MARGIN with a store call cut
short: a "maybe" (the write may have landed) instead of the SDK's own answer.
This check keeps the SDK's own bounds inside the function's time.

Where the numbers come from: contract/code-facts.json (sdk.clients: what every
client gets; sdk.waker: the queue's SendTaskSuccess client, the SDK's retries off,
repeated by SfnWaker itself, wake_attempts single attempts with pause_seconds x n
between them; limits: answer_margin_seconds, max_acquire_rounds, max_hand_offs). A
Rust unit test (crates/sfn-lock/src/lambda/contract_facts.rs) reads them back from the
built SDK configurations and the constants and fails while the file differs. No
.rs file is read here.

One SDK call
    attempts x attempt timeout + the pauses between attempts, or the operation
    timeout if the code sets one, whichever is smaller: the operation timeout
    bounds the whole call, its retries and pauses included.
The pauses (standard retry, aws-smithy-runtime 1.16.2 as Cargo.lock pins it;
sources below): before attempt n+1, min(initial_backoff x 2^(n-1),
max_backoff) x a full jitter in [0, 1); but a server's x-amz-retry-after is
honoured up to max_backoff, so the worst pause is max_backoff (and, under retry
behaviour 2.1, up to 5 s more than the jittered pause). Defaults 1 s and 20 s
as the code sets them (the facts' initial_backoff_seconds, max_backoff_seconds).

A function's calls, per path (ACQUIRE_PATHS, RELEASE_PATHS, SWEEP_RECORD_PATHS
below, traced by hand; the Rust suite counts each path's requests at the wire:
tests/suite/store.rs, semaphore.rs, queue.rs, cleanup_calls.rs)
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
                              SQS record runs under what is left of it, and a record
                              it cannot finish is reported alone for redelivery.
                              Checked: one call fits, and so does one record of the
                              largest ordinary shape (below), so that a record does
                              not fail on every delivery for lack of time.

Time kept back from the Timeout
    ANSWER_MARGIN (limits.answer_margin_seconds): the guard stops the work that long before the
    deadline, to answer in.
    COLD_START_MARGIN_SECONDS (below).

Rules
    sdk-bounded        some timeout bounds every call (otherwise nothing fits)
    <function>         its calls' worst case + the margins fit in its Timeout

A fact missing from the file, a retry mode other than standard, or a waker
client that retries stops the check with an error (it prices none of those).

Dropped with the Rust parsing (issue 25): "deadline-guards", which read that each
handler runs under the deadline guard, was code shape; handle_acquire's cut is
tested by its behaviour (tests/suite/wait_bound.rs), and the checks above price
what the guard cuts. "CODE_SHAPE" (each hand-traced call still where it was) went
too: the paths' request counts are the Rust suite's wire-counted tests.

Usage: function_time_budget.py template.yaml | function_time_budget.py --self-test
"""

from __future__ import annotations

import copy
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import code_facts  # noqa: E402
from code_facts import FactsError as SourceError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# The SDK's standard retry (the facts give the values the code sets). Read in the
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
# (the sweep; the paths exclude one another: a record is released, deferred or
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
# the store's pump): the oldest waiter's item read, the conditional write that
# makes it the holder (and takes it off the queue), then SendTaskSuccess.
WAKE = "SendTaskSuccess"
HAND_OFF = ["GetItem (the oldest waiter)", "UpdateItem (grant it)", WAKE]
# A further hand-off, after the previous waiter's task had ended: its grant taken back.
NEXT_HAND_OFF = HAND_OFF + ["UpdateItem (take the grant back)"]

# acquire-lock, one round (the DynamoDB store's acquire, and a queued caller's).
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

# release-lock (the DynamoDB store's release): the release, leaving the queue,
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

FUNCTIONS = {  # the rule's name: the binary (Metadata.BuildProperties.Binary)
    "acquire-lock": "acquire-lock",
    "release-lock": "release-lock",
    "release-execution-locks": "release-execution-locks",
}

Facts = dict[str, Any]  # contract/code-facts.json
Problem = tuple[str, str]  # (rule, message)


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


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def sdk_settings(facts: Facts) -> Sdk:
    clients = code_facts.get(facts, "sdk", "clients")
    if clients.get("retry_mode") != "standard":
        raise SourceError(f"sdk.clients.retry_mode is {clients.get('retry_mode')!r}: this check knows the "
                          "standard retry only")
    sdk = Sdk(
        attempts=int(code_facts.get(facts, "sdk", "clients", "max_attempts")),
        attempt_timeout=_seconds(clients.get("attempt_timeout_seconds")),
        operation_timeout=_seconds(clients.get("operation_timeout_seconds")),
        connect_timeout=_seconds(clients.get("connect_timeout_seconds")),
        initial_backoff=float(code_facts.get(facts, "sdk", "clients", "initial_backoff_seconds")),
        max_backoff=float(code_facts.get(facts, "sdk", "clients", "max_backoff_seconds")),
    )
    if sdk.attempts < 1:
        raise SourceError(f"sdk.clients.max_attempts {sdk.attempts}")
    return sdk


def waker_cost(facts: Facts, sdk: Sdk) -> float:
    """One wake-up's worst case: SfnWaker's own loop of wake_attempts SendTaskSuccess
    calls, each one attempt of the waker's client, with a pause of pause_seconds x n
    before attempt n."""
    waker = code_facts.get(facts, "sdk", "waker")
    if code_facts.get(facts, "sdk", "waker", "max_attempts") != 1:
        raise SourceError(f"sdk.waker.max_attempts is {waker['max_attempts']}: this check prices each "
                          "SendTaskSuccess as one attempt (the waker's client retries nothing)")
    attempts = int(code_facts.get(facts, "sdk", "waker", "wake_attempts"))
    pause = float(code_facts.get(facts, "sdk", "waker", "pause_seconds"))
    one = Sdk(1, _seconds(waker.get("attempt_timeout_seconds")), _seconds(waker.get("operation_timeout_seconds")),
              sdk.connect_timeout, sdk.initial_backoff, sdk.max_backoff).call()
    return attempts * one + sum(pause * n for n in range(2, attempts + 1))


def answer_margin(facts: Facts) -> float:
    return float(code_facts.get(facts, "limits", "answer_margin_seconds"))


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


def budgets(template: dict, facts: Facts) -> tuple[Sdk, list[Budget]]:
    sdk = sdk_settings(facts)
    margins = answer_margin(facts) + COLD_START_MARGIN_SECONDS
    rounds = code_facts.get(facts, "limits", "max_acquire_rounds")
    hand_offs = code_facts.get(facts, "limits", "max_hand_offs")
    call, wake = sdk.call(), waker_cost(facts, sdk)

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


def problems(template: dict, facts: Facts) -> list[Problem]:
    """Every rule's problems. SourceError if a number cannot be read."""
    sdk, found_budgets = budgets(template, facts)
    found: list[Problem] = []
    if math.isinf(sdk.call()):
        found.append(("sdk-bounded", "sdk.clients: neither an operation timeout nor an attempt timeout "
                                     "bounds a call"))
    for budget in found_budgets:
        found += [(budget.function, message) for message in budget.problems()]
    return found


def report(template: dict, facts: Facts) -> list[str]:
    sdk, found_budgets = budgets(template, facts)
    margin = answer_margin(facts)
    lines = [f"SDK ({code_facts.FACTS} sdk.clients): {sdk.describe()}",
             f"margins: ANSWER_MARGIN {margin:g} s + cold start {COLD_START_MARGIN_SECONDS:g} s"]
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


# -- self-test --------------------------------------------------------------------------
_PATHS = {"operation_timeout": ("sdk", "clients", "operation_timeout_seconds"),
          "operation_attempt_timeout": ("sdk", "clients", "attempt_timeout_seconds"),
          "with_max_attempts": ("sdk", "clients", "max_attempts"),
          "ANSWER_MARGIN": ("limits", "answer_margin_seconds")}


@dataclass(frozen=True)
class _Fact:
    """Sets one fact of the contract file (None: the code sets none), whatever it says now,
    so that the cases follow the shipped settings as they change. Every other change is
    to the template."""
    name: str
    value: Any

    def apply(self, facts: Facts) -> None:
        *parents, key = _PATHS.get(self.name, tuple(self.name.split(".")))
        if self.value is _MISSING:
            del code_facts.get(facts, *parents)[key]
        else:
            code_facts.get(facts, *parents)[key] = self.value


_MISSING = object()  # a _Fact's value: the fact removed


def _Sdk(name: str, seconds: Any) -> _Fact:  # noqa: N802 (reads as the old cases did)
    return _Fact(name, seconds)


def _secs(seconds: float) -> float:
    return seconds


def _timeout(resource: str, value: Any) -> Callable[[dict], None]:
    def change(template: dict) -> None:
        properties = template["Resources"][resource]["Properties"]
        if value is None:
            properties.pop("Timeout")
        else:
            properties["Timeout"] = value
    return change


def _apply(template: dict, facts: Facts, changes: list) -> tuple[dict, Facts]:
    template, facts = copy.deepcopy(template), copy.deepcopy(facts)
    for change in changes:
        if isinstance(change, _Fact):
            change.apply(facts)
        else:
            change(template)
    return template, facts


def _lowered(template: dict, facts: Facts, changes: list, function: str) -> int:
    """One second less than the Timeout `function` needs after `changes` (at least 1)."""
    budget = next(b for b in budgets(*_apply(template, facts, changes))[1] if b.function == function)
    return max(1, math.ceil(max(seconds for _, seconds in budget.needs) + budget.margins) - 1)


def self_test(template: dict, facts: Facts) -> int:
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
        shipped = problems(template, facts)
        timeouts = {function: function_timeout(template, binary)[0] for function, binary in FUNCTIONS.items()}
        expect(True, "reads every number from the contract file", report(template, facts)[0])
    except SourceError as error:
        expect(False, "reads every number from the contract file", error)
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
        ("retries turned on (1 -> 2 attempts of 2 s and a pause) with no operation timeout", "release-lock",
         one_try, [_Sdk("with_max_attempts", "2")]),
        ("release-lock's Timeout lowered to 1 s below its need (2 s calls)", "release-lock", two_second_calls,
         [_timeout("ReleaseLockFunction", _lowered(template, facts, two_second_calls, "release-lock"))]),
        ("release-lock's Timeout removed (Lambda's default, 3 s) under 2 s calls", "release-lock", two_second_calls,
         [_timeout("ReleaseLockFunction", None)]),
        ("the sweep's Timeout lowered to 1 s below its largest record's need (2 s calls)", "release-execution-locks",
         two_second_calls,
         [_timeout("ReleaseExecutionLocksFunction", _lowered(template, facts, two_second_calls, "release-execution-locks"))]),
        ("the sweep's Timeout a parameter whose MinValue is 1", "release-execution-locks", short_calls,
         [_timeout("ReleaseExecutionLocksFunction", {"Ref": "WorkloadTimeoutSeconds"}),
          lambda template: template["Parameters"]["WorkloadTimeoutSeconds"].update(MinValue=1)]),
        (f"the SDK's timeouts raised 0.1 s -> {acquire_timeout:g} s", "acquire-lock", short_calls,
         [_Sdk("operation_timeout", _secs(acquire_timeout)), _Sdk("operation_attempt_timeout", _secs(acquire_timeout))]),
        ("acquire-lock's Timeout lowered to 1 s below its need (0.1 s calls)", "acquire-lock", short_calls,
         [_timeout("AcquireLockFunction", _lowered(template, facts, short_calls, "acquire-lock"))]),
        (f"ANSWER_MARGIN raised to the function's {acquire_timeout:g} s (0.1 s calls)", "acquire-lock", short_calls,
         [_Fact("ANSWER_MARGIN", math.ceil(acquire_timeout))]),
        ("the waker's wake-ups raised to 20 of 4 s calls", "release-lock", short_calls,
         [_Fact("sdk.waker.wake_attempts", 20), _Fact("sdk.waker.operation_timeout_seconds", 4)]),
        ("neither an attempt nor an operation timeout", "sdk-bounded", [],
         [_Sdk("operation_timeout", None), _Sdk("operation_attempt_timeout", None)]),
    ]
    for label, rule, fit, breaks in cases:
        try:
            control = [m for r, m in problems(*_apply(template, facts, fit)) if r == rule]
            found = [m for r, m in problems(*_apply(template, facts, fit + breaks)) if r == rule]
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

    # A fact this check cannot price stops it instead of turning it off.
    unreadable = [
        ("max_acquire_rounds missing", [_Fact("limits.max_acquire_rounds", _MISSING)]),
        ("the adaptive retry mode", [_Fact("sdk.clients.retry_mode", "adaptive")]),
        ("the waker's client retrying (SendTaskSuccess priced as one attempt)", [_Fact("sdk.waker.max_attempts", 3)]),
        ("the sweep function not found", [lambda template: template["Resources"]["ReleaseExecutionLocksFunction"]
                                          ["Metadata"]["BuildProperties"].update(Binary="sweep")]),
    ]
    for label, changes in unreadable:
        try:
            problems(*_apply(template, facts, changes))
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
        try:
            return self_test(load(ROOT / "template.yaml"), code_facts.load())
        except SourceError as error:
            print(f"function time budget: {error}")
            return 1
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(args[0])
    template = load(path)
    try:
        facts = code_facts.load(path.resolve().parent)
        found = problems(template, facts)
        lines = report(template, facts)
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
