"""The Python baseline for `make bench`: the lock's acquire and release as a
small boto3 Lambda handler, the way one would usually write it.

It makes the same DynamoDB requests as the Rust functions (crates/sfn-lock/src/
dynamodb.rs): one conditional UpdateItem for a grant (ALL_NEW back, ALL_OLD on a
failed condition) and one for a release, with the same expressions, the same
SDK timeouts and retry budget, and the client created once at module init
(cold start), not per invocation. It skips what the Rust functions do beyond
that (input validation, the renew path, structured logs), so it is, if
anything, flattered by the comparison.

Run under the Runtime Interface Client:  python -m awslambdaric lock_handler.acquire
"""

import os
import time

import boto3
from botocore.config import Config

TABLE = os.environ["LOCK_TABLE_NAME"]
DEFAULT_LEASE_SECONDS = int(os.environ.get("DEFAULT_LEASE_SECONDS", "900"))
TTL_GRACE_SECONDS = 86_400

dynamodb = boto3.client(
    "dynamodb",
    config=Config(
        connect_timeout=1,
        read_timeout=2,
        retries={"mode": "standard", "max_attempts": 3},
    ),
)

GRANT = (
    "SET #owner = :owner, #acquiredAt = :now, #expiresAt = :expiresAt, #ttl = :ttl, "
    "#fencingToken = if_not_exists(#fencingToken, :tokenBase) + :one"
)
GRANT_CONDITION = "attribute_not_exists(#owner) OR #expiresAt < :now"
RELEASE = "REMOVE #owner, #acquiredAt, #expiresAt SET #ttl = :ttl"
RELEASE_CONDITION = "#owner = :owner"


class LockUnavailable(Exception):
    """awslambdaric reports the class name as errorType, as Step Functions needs."""


def _names(*names):
    return {f"#{name}": name for name in names}


def acquire(event, context):
    lock_name, owner = event["lockName"], event["owner"]
    lease = int(event.get("leaseSeconds", DEFAULT_LEASE_SECONDS))
    now = int(time.time() * 1000)
    expires_at = now + lease * 1000
    try:
        item = dynamodb.update_item(
            TableName=TABLE,
            Key={"lockName": {"S": lock_name}},
            UpdateExpression=GRANT,
            ConditionExpression=GRANT_CONDITION,
            ExpressionAttributeNames=_names(
                "owner", "acquiredAt", "expiresAt", "ttl", "fencingToken"
            ),
            ExpressionAttributeValues={
                ":owner": {"S": owner},
                ":now": {"N": str(now)},
                ":expiresAt": {"N": str(expires_at)},
                ":ttl": {"N": str(expires_at // 1000 + TTL_GRACE_SECONDS)},
                ":tokenBase": {"N": str(now * 1000)},
                ":one": {"N": "1"},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )["Attributes"]
    except dynamodb.exceptions.ConditionalCheckFailedException as error:
        holder = error.response.get("Item", {}).get("owner", {}).get("S")
        raise LockUnavailable(f"lock {lock_name} is held by {holder}") from None
    return {
        "lockName": lock_name,
        "owner": owner,
        "fencingToken": int(item["fencingToken"]["N"]),
        "acquiredAt": int(item["acquiredAt"]["N"]),
        "expiresAt": int(item["expiresAt"]["N"]),
        "leaseSeconds": lease,
        "outcome": "granted",
    }


def release(event, context):
    lock_name, owner = event["lockName"], event["owner"]
    now = int(time.time() * 1000)
    try:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"lockName": {"S": lock_name}},
            UpdateExpression=RELEASE,
            ConditionExpression=RELEASE_CONDITION,
            ExpressionAttributeNames=_names("owner", "acquiredAt", "expiresAt", "ttl"),
            ExpressionAttributeValues={
                ":owner": {"S": owner},
                ":ttl": {"N": str(now // 1000 + TTL_GRACE_SECONDS)},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        outcome = "released"
    except dynamodb.exceptions.ConditionalCheckFailedException:
        outcome = "not_held"
    return {
        "lockName": lock_name,
        "owner": owner,
        "released": outcome == "released",
        "outcome": outcome,
    }

