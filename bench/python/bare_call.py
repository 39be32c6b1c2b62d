"""The Python baseline's floor: the lock's conditional UpdateItem sent with
boto3 from a warm process, the very client and requests of lock_handler, and
nothing else.

Usage: python bare_call.py TABLE, then on stdin one request per line,
"grant NAME" or "release NAME"; answers each with its wall time in ms.
"""

import os
import sys
import time

os.environ.setdefault("LOCK_TABLE_NAME", sys.argv[1])

import lock_handler  # noqa: E402 - the handler module reads LOCK_TABLE_NAME at import

OWNER = "arn:aws:states:us-east-1:123456789012:execution:bench:owner-a"


def main() -> None:
    client, names = lock_handler.dynamodb, lock_handler._names
    for line in sys.stdin:
        mode, lock_name = line.strip().split(" ", 1)
        now = int(time.time() * 1000)
        expires_at = now + 900_000
        started = time.perf_counter_ns()
        if mode == "grant":
            client.update_item(
                TableName=lock_handler.TABLE,
                Key={"lockName": {"S": lock_name}},
                UpdateExpression=lock_handler.GRANT,
                ConditionExpression=lock_handler.GRANT_CONDITION,
                ExpressionAttributeNames=names("owner", "acquiredAt", "expiresAt", "ttl", "fencingToken"),
                ExpressionAttributeValues={
                    ":owner": {"S": OWNER},
                    ":now": {"N": str(now)},
                    ":expiresAt": {"N": str(expires_at)},
                    ":ttl": {"N": str(expires_at // 1000 + lock_handler.TTL_GRACE_SECONDS)},
                    ":tokenBase": {"N": str(now * 1000)},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        elif mode == "release":
            client.update_item(
                TableName=lock_handler.TABLE,
                Key={"lockName": {"S": lock_name}},
                UpdateExpression=lock_handler.RELEASE,
                ConditionExpression=lock_handler.RELEASE_CONDITION,
                ExpressionAttributeNames=names("owner", "acquiredAt", "expiresAt", "ttl"),
                ExpressionAttributeValues={
                    ":owner": {"S": OWNER},
                    ":ttl": {"N": str(now // 1000 + lock_handler.TTL_GRACE_SECONDS)},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        else:
            raise SystemExit(f"unknown mode {mode}")
        elapsed = (time.perf_counter_ns() - started) / 1e6
        sys.stdout.write(f"{elapsed}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
