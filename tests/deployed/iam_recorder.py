"""Runs ministack with its IAM evaluation on (AUTH=true) and records every
decision it makes for a role session, one JSON line per call, in the file
SFN_LOCK_IAM_CALLS names: the principal, the action, the resource, the
decision, and the Sids of the role's Allow statements that match the call.

Why a recorder: ministack logs no IAM decision (not even at LOG_LEVEL=DEBUG),
and the deployed tier must list the template's statements that no scenario
reaches (issue 26, "IAM for real"). It observes only: the decision returned is
ministack's own, unchanged. scripts/deployed-stack.sh starts ministack through
this file when SFN_LOCK_DEPLOYED_AUTH=true.

A Lambda function under AUTH=true runs with a session of its execution role
(ministack.core.lambda_runtime.execution_credentials): every SDK call of the
binaries reaches ministack.core.iam_evaluator.evaluate with principal
arn:aws:sts::ACCOUNT:assumed-role/ROLE/FUNCTION. The test driver's `test` key
is the account root, which enforce() allows before evaluate() is called, so
only the functions' calls are recorded.
"""

from __future__ import annotations

import json
import os
import sys
import threading

os.environ["AUTH"] = "true"  # read by ministack.app at import

from ministack.core import iam_evaluator  # noqa: E402

_OUT = os.environ.get("SFN_LOCK_IAM_CALLS", "")
_LOCK = threading.Lock()
_evaluate = iam_evaluator.evaluate


_pending = threading.local()


def evaluate(ctx, policies, *limits):
    result = _evaluate(ctx, policies, *limits)
    # Identity policies only: evaluate() also serves resource policies
    # (evaluate_resource_policy), whose statements are not the role's.
    if _OUT and ":assumed-role/" in ctx.principal_arn and sys._getframe(1).f_code.co_name == "enforce":
        _pending.call = {
            "principal": ctx.principal_arn,
            "action": ctx.action,
            "resource": ctx.resource_arn,
            "identity": result.decision,
            "allowed_by": sorted({
                stmt.sid or "(no Sid)"
                for stmts in policies for stmt in stmts
                if iam_evaluator._first_match(ctx, [stmt], "Allow")
            }),
        }
    return result


def enforce(*args, **kwargs):
    # The answer after the resource policy too (a bucket policy's Deny): the
    # call is recorded once enforce() has decided.
    _pending.call = None
    answer = _enforce(*args, **kwargs)
    call = _pending.call
    if call is not None:
        call["decision"] = "Allow" if answer is None else getattr(answer, "decision", type(answer).__name__)
        try:
            with _LOCK, open(_OUT, "a", encoding="utf-8") as f:
                f.write(json.dumps(call) + "\n")
        except OSError as e:  # never let the observer change an answer
            print(f"iam_recorder: {e!r}", file=sys.stderr)
    return answer


# Where ministack authorizes differently from AWS, the AWS way first
# (ministack_patches.py); the recorder then wraps the patched enforce.
import ministack_patches  # noqa: E402

ministack_patches.apply()

# And a JSONata Parallel state's Arguments, Output and Assign, which
# ministack ignores (ministack_jsonata.py; the JSONata flavour's deployed runs).
import ministack_jsonata  # noqa: E402

ministack_jsonata.apply()

# app.py imports enforce inside its request handler (from ... import), and
# enforce() calls evaluate by its module global: both see the replacements.
_enforce = iam_evaluator.enforce
iam_evaluator.evaluate = evaluate
iam_evaluator.enforce = enforce

if __name__ == "__main__":
    from ministack.app import main

    sys.exit(main())
