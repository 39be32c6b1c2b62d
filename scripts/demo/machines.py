"""The stack's own state machines, started through the Step Functions API as
a user starts them: the queued one (executions take turns in a first-in,
first-out queue), the skip-if-running one (a run that finds the lock held
ends at once), and the locked one stopped while it holds the lock, which the
stack's cleanup chain frees."""

from __future__ import annotations

import json
import time

from stack import LOCK_NAME, PARAMETERS, poll

QUEUED = "QueuedWorkflowStateMachineArn"
SKIP = "SkipIfRunningStateMachineArn"
LOCKED = "LockedWorkflowStateMachineArn"
# Long enough that B queues and C skips while A still holds, on a loaded
# machine; short enough not to make the newcomer wait.
HOLD_SECONDS = 6
# The stopped execution's workload outlives the demo: only the sweep can free
# its lock in time (the emulator's StopExecution lets the state run on).
STOPPED_WORKLOAD_SECONDS = 240


def granted_token(stack, arn: str) -> int:
    """The fencing token the execution was granted, from its history: the
    answer of its Acquire Lock task (the queued machine's callback output is
    the grant itself; the locked machine's Lambda output wraps it in Payload)."""
    for event in stack.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]:
        if event["type"] == "TaskSucceeded":
            output = json.loads(event["taskSucceededEventDetails"]["output"])
            grant = output.get("Payload", output) if isinstance(output, dict) else {}
            if isinstance(grant, dict) and grant.get("owner") == arn and "fencingToken" in grant:
                return int(grant["fencingToken"])
    raise AssertionError(f"no grant in the history of {arn}")


def skipped(stack, story, letter: str, holder: str) -> None:
    """Starts a skip-if-running execution while `holder` holds the lock and
    shows it end at once, skipped, naming the holder."""
    arn = stack.start(SKIP, letter, 0)
    done = stack.ended(arn, timeout=30)
    output = json.loads(done.get("output") or "{}")
    story.expect(done["status"] == "SUCCEEDED" and output.get("skipped") is True,
                 f"execution {letter} should have skipped: {done['status']} {output}")
    story.expect(output["lock"]["holder"] == holder,
                 f"execution {letter} skipped for {output['lock']['holder']}, not {holder}")
    took = (done["stopDate"] - done["startDate"]).total_seconds()
    story.say(f"execution {letter} (skip-if-running) ended in {took:.1f} s: SUCCEEDED, output "
              f'{{"skipped": true, "lock": {{"holder": {story.who(holder)}, …}}}}; its workload never ran')


def queue_and_skip(stack, story) -> None:
    story.act("1. The queued state machine: two executions of one lock take turns, a third one skips")
    a = stack.start(QUEUED, "A", HOLD_SECONDS)
    story.say(f"execution A started (QueuedWorkflowStateMachineArn; its workload takes {HOLD_SECONDS} s)")
    story.say(f"execution A holds lock {LOCK_NAME} (fencing token {stack.holds(a)})")
    story.aside("(a fencing token rises with every grant, so a resource can refuse a late writer; "
                "the DynamoDB store starts it from the clock)")

    b = stack.start(QUEUED, "B", 1)
    story.say("execution B started (the same state machine, the same lock)")
    # Queued: its acquire task waits on a task token; the record counts it.
    poll("execution B queued", lambda: stack.queue_length() == 1, timeout=30, pause=0.1)
    story.expect(stack.lock.holders() == [a], "the lock changed hands while A held it")
    story.say("execution B waits in the lock's queue (queue length 1): its Acquire Lock task holds a task "
              "token, with no polling, retries or state transitions while it waits")

    skipped(stack, story, "C", a)

    token_b = stack.holds(b, timeout=60)
    story.say(f"execution A's workload ended; its release handed the lock to B, the oldest waiter, and "
              f"woke it (SendTaskSuccess): B holds it, fencing token {token_b}")
    stack.succeeded(b)
    token_a = granted_token(stack, a)
    story.expect(token_a < token_b == granted_token(stack, b),
                 f"fencing tokens not rising in grant order: A {token_a}, B {token_b}")
    for arn in (a, b):
        done = stack.succeeded(arn)
        story.expect(json.loads(done["output"]) == json.loads(done["input"]), f"output changed: {done}")
    stack.free()
    story.say(f"executions A and B SUCCEEDED, each output its input; {LOCK_NAME} is free")


class SweepLog:
    """The sweep's own log lines about one execution, read from its CloudWatch
    Logs group (the function's LoggingConfig names it) as they arrive."""

    def __init__(self, stack, arn: str):
        self.logs = stack.session.client("logs")
        config = stack.session.client("lambda").get_function_configuration(
            FunctionName=stack.outputs["ReleaseExecutionLocksFunctionArn"])
        self.group = config["LoggingConfig"]["LogGroup"]
        self.arn = arn
        self.since = int(time.time() * 1000) - 1000
        self.seen: set[tuple] = set()

    def new_lines(self) -> list[str]:
        try:
            events = self.logs.filter_log_events(logGroupName=self.group, startTime=self.since)["events"]
        except self.logs.exceptions.ResourceNotFoundException:
            return []  # no invocation logged yet
        lines = []
        for event in events:
            # The emulator's events carry no eventId: a line is known by where and when it was written.
            key = (event.get("logStreamName"), event["timestamp"], event["message"])
            if key in self.seen or self.arn not in event["message"]:
                continue
            self.seen.add(key)
            # The tracing prefix ("INFO Lambda runtime invoke{requestId=…}: ") is noise here.
            lines.append(event["message"].split("}: ", 1)[-1].strip())
        return lines


def stopped_and_swept(stack, story, show_status) -> None:
    grace = int(PARAMETERS["WorkloadMaxRunSeconds"])
    delay = int(PARAMETERS["CleanupDelaySeconds"])
    story.act("2. A stopped execution still holds the lock; the stack's sweep frees it")
    d = stack.start(LOCKED, "D", STOPPED_WORKLOAD_SECONDS)
    story.say(f"execution D started (LockedWorkflowStateMachineArn; a {STOPPED_WORKLOAD_SECONDS} s workload)")
    story.say(f"execution D holds lock {LOCK_NAME} (fencing token {stack.holds(d)})")

    stack.sfn.stop_execution(executionArn=d, error="Demo.Stopped", cause="stopped by make demo")
    stopped = stack.describe(d)
    story.expect(stopped["status"] == "ABORTED", f"D is {stopped['status']} after StopExecution")
    stopped_at = time.time()
    story.say("StopExecution D: ABORTED. No Catch runs on a stop, so D never releases; its workload's "
              "Lambda invocation may still run (a stop does not end it)")
    show_status("still held by the stopped execution")
    story.say(f"the status change event goes through the stack's rule to the cleanup queue, delayed {delay} s; "
              f"the sweep frees nothing until D has been over for {grace} s (WorkloadMaxRunSeconds)…")

    log = SweepLog(stack, d)

    def tell():
        for line in log.new_lines():
            story.say("release-execution-locks logs: " + line.replace(f'"{d}"', "D").replace(d, "D"))

    def watch():
        tell()
        return stack.lock.holders() == [] and time.time()

    freed_at = poll("the sweep frees D's lock", watch, timeout=delay + grace + 90, pause=0.5)
    time.sleep(0.5)  # the release's own log line lands just after its write
    tell()
    after = freed_at - stopped_at
    story.expect(after >= grace - 1, f"freed {after:.1f} s after the stop, inside the {grace} s grace")
    story.say(f"{LOCK_NAME} is free, {after:.0f} s after the stop: rule → delayed queue → event source "
              "mapping → release-execution-locks, all of the stack's own wiring")
