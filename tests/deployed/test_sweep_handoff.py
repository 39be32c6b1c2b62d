"""On the sweep variant (background.py started it with the two stopped
holders): a queued execution waiting behind the stopped holder of the
stack's lock is handed the lock by the sweep (its SendTaskSuccess), and the
reconciler, invoked as ReconcileSchedule invokes it (Lambda Invoke with
{"sfnLockReconcile": {}}), looked at both stopped holders while they were
inside their grace and kept them. Then the statements each reached, from
iam-calls.jsonl (IAM on); and the release-lock hand-off of test_queued.py."""

from __future__ import annotations


import iam_calls
from background import SWEEP_GRACE_SECONDS
from lockstate import Lock, history
from test_queued import ended, the_grant

SWEEP = "ReleaseExecutionLocksFunction"


def test_reconciler_keeps_ended_holders_inside_their_grace(swept):
    reconciled = swept["reconciled"]
    assert reconciled["error"] is None, reconciled
    report = reconciled["report"]
    # Both stopped holders' locks listed (a Scan of the table), each looked up
    # in Step Functions: ended, inside the grace, so left for the next run.
    assert report["locksLookedAt"] >= 2 and report["executionsChecked"] >= 2, report
    assert report["released"] == [] and report["leftForLater"] >= 2, report
    assert report["failed"] == 0 and report["truncated"] is False, report
    for stopped in swept["stopped"].values():
        assert reconciled["at"] - stopped["stopped_at"] < SWEEP_GRACE_SECONDS, \
            "the reconciler ran after the grace: the check is void"
    assert iam_calls.sids("sfn-lock-sweep", SWEEP, "dynamodb:Scan") == {"ReconcilerScansTheTable"}


def test_stopped_holder_swept_hands_the_lock_to_the_queued_waiter(aws, swept):
    stopped = swept["stopped"]["stack"]
    freed_at = stopped["watch"].seen()
    sfn = aws.client("stepfunctions")
    waiter = swept["waiter"]
    described = ended(sfn, waiter, timeout=60)
    assert described["status"] == "SUCCEEDED", described
    # One acquire invocation, completed by the sweep's SendTaskSuccess once it
    # released the stopped holder: after the grace, not before.
    grant, granted_at = the_grant(history(sfn, waiter), waiter)
    assert granted_at.timestamp() >= stopped["stopped_at"] + SWEEP_GRACE_SECONDS - 1, (grant, freed_at)
    lock = Lock(aws, swept["stack"]["outputs"]["LockStoreUrl"], grant["lockName"])
    assert lock.holders() == [] and lock.queue_length() == 0
    assert iam_calls.sids("sfn-lock-sweep", SWEEP, "states:SendTaskSuccess") == {"HandOffToQueuedWaiters"}
    assert iam_calls.sids("sfn-lock-sweep", SWEEP, "dynamodb:DeleteItem") == {"DeleteSemaphorePermitMarkers"}


def test_release_hand_off_statements_reached(default_stack):
    """test_queued.py's waiters, handed the lock by release-lock: its read of
    the oldest waiter, its SendTaskSuccess, its delete of the woken waiter's
    item; and acquire-lock's waiter item and its own admission."""
    for function, action, sid in [
            ("ReleaseLockFunction", "dynamodb:GetItem", "ReadQueuedWaiters"),
            ("ReleaseLockFunction", "states:SendTaskSuccess", "HandOffToQueuedWaiters"),
            ("ReleaseLockFunction", "dynamodb:DeleteItem", "DeleteSemaphorePermitMarkers"),
            ("AcquireLockFunction", "dynamodb:PutItem", "WriteSemaphorePermitMarkers"),
            ("AcquireLockFunction", "states:SendTaskSuccess", "AdmitQueuedWaiters")]:
        assert sid in iam_calls.sids("sfn-lock", function, action), (function, action, sid)
