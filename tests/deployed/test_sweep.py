"""A stopped execution's lock freed by the deployed cleanup chain, through the
AWS APIs only: StopExecution -> the status event -> the stack's rule (its
InputTransformer) -> the delayed cleanup queue -> the event source mapping ->
release-execution-locks, which waits out the grace (WorkloadMaxRunSeconds
after the end, re-queueing an early event) and then releases.

Twice, on one stack (background.py started both before the first test): an
execution of the stack's own locked workflow, and one of a state machine of
the user's own, wrapped by `sfn-lock wrap` and named in
LockedStateMachineArns, as the README's recipe says."""

from __future__ import annotations

import pytest

from background import NOTES, SWEEP_GRACE_SECONDS
from lockstate import poll


def assert_freed_after_its_grace(stopped):
    assert stopped["status"] == "ABORTED", stopped["status"]
    freed_at = stopped["watch"].seen()
    NOTES.append(f"{stopped['arn'].split(':')[-2]}: freed by the sweep "
                 f"{freed_at - stopped['stopped_at']:.1f} s after the stop")
    # Held through the grace: the sweep releases no earlier than
    # WorkloadMaxRunSeconds after the end (the workload may still run).
    assert freed_at - stopped["stopped_at"] >= SWEEP_GRACE_SECONDS - 1, \
        f"freed {freed_at - stopped['stopped_at']:.1f} s after the stop, inside the {SWEEP_GRACE_SECONDS} s grace"


@pytest.mark.parametrize("whose", ["stack", "user"])
def test_stopped_execution_lock_freed_by_the_sweep_after_its_grace(swept, whose):
    assert_freed_after_its_grace(swept["stopped"][whose])


def test_sweep_consumed_every_event_and_dead_lettered_none(aws, swept):
    for stopped in swept["stopped"].values():
        stopped["watch"].seen()
    sqs = aws.client("sqs")
    outputs = swept["stack"]["outputs"]

    def depth(key):
        attrs = sqs.get_queue_attributes(QueueUrl=outputs[key], AttributeNames=["All"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    # The mapping deletes a message once the sweep's invocation has answered,
    # just after the release it made: polled, not read once.
    poll("the cleanup queue empties", lambda: depth("CleanupQueueUrl") == 0, timeout=30)
    assert depth("CleanupDeadLetterQueueUrl") == 0
