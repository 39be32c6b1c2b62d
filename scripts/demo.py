"""The lock pair at work, through the real binaries (run by `make demo`).

Runs inside scripts/local-stack.sh: SFN_LOCK_LAMBDA_URL is the Invoke API of
`cargo lambda watch`, which serves acquire-lock and release-lock.
"""

import json
import os
import sys
import urllib.error
import urllib.request

LAMBDA_URL = os.environ["SFN_LOCK_LAMBDA_URL"]
LOCK = "nightly-etl"
FIRST = "arn:aws:states:us-east-1:123456789012:execution:etl:run-41"
SECOND = "arn:aws:states:us-east-1:123456789012:execution:etl:run-42"


def invoke(function, event):
    """Returns (result, None) or (None, (errorType, cause))."""
    request = urllib.request.Request(
        f"{LAMBDA_URL}/2015-03-31/functions/{function}/invocations",
        data=json.dumps(event).encode(),
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response), None
    except urllib.error.HTTPError as error:
        if error.code != 500:
            raise
        body = json.load(error)
        return None, (body["errorType"], json.loads(body["errorMessage"]))


def show(step, function, event, expect_error=None):
    result, error = invoke(function, event)
    print(f"\n{step}\n  {function} {json.dumps(event)}")
    if error:
        print(f"  -> error {error[0]}: {json.dumps(error[1])}")
    else:
        print(f"  -> {json.dumps(result)}")
    if (error and error[0]) != expect_error:
        sys.exit(f"demo: expected {expect_error or 'success'}, got {error or result}")
    return result


def main():
    print(f"sfn-lock demo: two executions want the lock {LOCK!r}")
    first = show("1. run-41 acquires the free lock", "acquire-lock", {"lockName": LOCK, "owner": FIRST, "leaseSeconds": 900})
    show("2. run-42 finds it held (locked-workflow retries on LockUnavailable; skip-if-running ends as skipped)",
         "acquire-lock", {"lockName": LOCK, "owner": SECOND}, expect_error="LockUnavailable")
    show("3. run-41 releases, passing its acquire output straight through", "release-lock", first)
    second = show("4. run-42 acquires on its next retry", "acquire-lock", {"lockName": LOCK, "owner": SECOND})
    show("5. run-41 releases again by mistake: harmless", "release-lock", {"lockName": LOCK, "owner": FIRST})
    show("6. run-42 releases", "release-lock", second)
    print(f"\nfencing tokens: run-41 {first['fencingToken']} < run-42 {second['fencingToken']}")


if __name__ == "__main__":
    main()
