"""A stopped execution's lock freed by the deployed cleanup chain, through the
AWS APIs only: StopExecution -> the status event -> the stack's rule (its
InputTransformer) -> the delayed cleanup queue -> the event source mapping ->
release-execution-locks, which waits out the grace (WorkloadMaxRunSeconds
after the end, re-queueing an early event) and then releases."""

from __future__ import annotations

import json
import time
import uuid

from lockstate import Lock, poll

DEFAULT_LOCK_NAME = "sfn-lock-default"
# The workload outlives the test's deadline: only the sweep can free the lock
# in time (ministack's StopExecution lets the running state go on, and the
# execution's own release would come after this).
WORKLOAD_SECONDS = 240
GRACE_SECONDS = 30  # the stack's WorkloadMaxRunSeconds


def test_stopped_execution_lock_freed_by_the_sweep_after_its_grace(aws, sweep_stack):
    outputs = sweep_stack["outputs"]
    sfn = aws.client("stepfunctions")
    lock = Lock(aws, outputs["LockStoreUrl"], DEFAULT_LOCK_NAME)
    assert lock.holders() == []
    arn = sfn.start_execution(stateMachineArn=outputs["LockedWorkflowStateMachineArn"],
                              name=f"stopped-{uuid.uuid4().hex[:8]}",
                              input=json.dumps({"sleepSeconds": WORKLOAD_SECONDS}))["executionArn"]
    poll("the execution holds the lock", lambda: lock.holders() == [arn], timeout=60)

    sfn.stop_execution(executionArn=arn, error="Test.Stopped", cause="the deployed tier stops it")
    stopped = sfn.describe_execution(executionArn=arn)
    assert stopped["status"] == "ABORTED", stopped["status"]
    stopped_at = stopped["stopDate"].timestamp()

    # Held through the grace: the sweep releases no earlier than
    # WorkloadMaxRunSeconds after the end (the workload may still run).
    freed_at = poll("the sweep frees the stopped execution's lock",
                    lambda: lock.holders() == [] and time.time(), timeout=WORKLOAD_SECONDS - 60, pause=0.5)
    assert freed_at - stopped_at >= GRACE_SECONDS - 1, \
        f"freed {freed_at - stopped_at:.1f} s after the stop, inside the {GRACE_SECONDS} s grace"
    # Nothing left in the queues: the event was consumed, none dead-lettered.
    sqs = aws.client("sqs")
    for key in ("CleanupQueueUrl", "CleanupDeadLetterQueueUrl"):
        attrs = sqs.get_queue_attributes(QueueUrl=outputs[key], AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "0", (key, attrs)
