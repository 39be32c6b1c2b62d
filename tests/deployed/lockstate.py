"""Reading the deployed stack's lock and executions through the AWS APIs only,
and polling them with a deadline (never a bare sleep)."""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import urlparse


class Deadline(AssertionError):
    pass


def poll(what, check, timeout=60.0, pause=0.2):
    """Calls check() until it returns something truthy; fails naming `what`
    and the last value seen once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(pause)
    raise Deadline(f"{what}: not within {timeout} s (last seen: {last!r})")


def encode_name(name: str) -> str:
    """The S3 key of a lock name, as the store writes it (store/names.rs):
    ASCII letters, digits and '-' as they are, every other byte _XX."""
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or b == ord("-")) else f"_{b:02X}"
                   for b in name.encode())


class Lock:
    """The holders of one lock, read from the store the stack's LockStoreUrl
    output names (dynamodb://TABLE, s3://BUCKET/PREFIX)."""

    def __init__(self, session, store_url: str, lock_name: str):
        self.url = urlparse(store_url)
        self.lock_name = lock_name
        if self.url.scheme == "dynamodb":
            self.ddb = session.client("dynamodb")
        elif self.url.scheme == "s3":
            self.s3 = session.client("s3")
        else:
            raise ValueError(f"no reader for {store_url}")

    def item(self) -> dict | None:
        """The lock's record: the DynamoDB item (plain values) or the S3 document."""
        if self.url.scheme == "dynamodb":
            got = self.ddb.get_item(TableName=self.url.netloc, Key={"lockName": {"S": self.lock_name}},
                                    ConsistentRead=True).get("Item")
            if got is None:
                return None
            return {k: next(iter(v.values())) for k, v in got.items()}
        key = self.url.path.lstrip("/") + encode_name(self.lock_name)
        try:
            body = self.s3.get_object(Bucket=self.url.netloc, Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def expires_at(self, owner: str) -> float:
        """When the owner's lease ends (epoch ms), as the record says; 0 if it
        holds nothing."""
        item = self.item() or {}
        if self.url.scheme == "dynamodb":
            return float(item["expiresAt"]) if item.get("owner") == owner else 0.0
        return max((float(h["expiresAt"]) for h in item.get("holders", []) if h.get("owner") == owner), default=0.0)

    def holders(self) -> list[str]:
        """The owners (execution ARNs) the record names as holding the lock now."""
        item = self.item()
        if not item:
            return []
        now_ms = time.time() * 1000
        if self.url.scheme == "dynamodb":
            owner = item.get("owner")
            return [owner] if owner and float(item.get("expiresAt", 0)) > now_ms else []
        return [h["owner"] for h in item.get("holders", []) if float(h.get("expiresAt", 0)) > now_ms]

    def fencing_token(self) -> int:
        item = self.item() or {}
        return int(item.get("fencingToken", 0))

    def queue_length(self) -> int:
        """How many executions wait in the lock's queue (DynamoDB only: the
        other stores keep no queue)."""
        item = self.item() or {}
        return int(item.get("queueLength", 0))


class Watch(threading.Thread):
    """poll() from a thread of its own: for a scenario whose moment matters
    (when a lock was freed) while the other scenarios run meanwhile. Give it
    a client of its own (boto3 sessions are not thread-safe)."""

    def __init__(self, what, check, timeout, pause=0.5):
        super().__init__(name=what, daemon=True)
        self.what, self.check, self.timeout, self.pause = what, check, timeout, pause
        self.seen_at: float | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self):
        try:
            # The clock read just before the check that first held: a slow
            # read cannot make the moment look later than it was.
            self.seen_at = poll(self.what, self._checked, self.timeout, self.pause)
        except BaseException as e:  # handed to the test that asks
            self.error = e

    def _checked(self):
        before = time.time()
        return self.check() and before

    def seen(self) -> float:
        """When check() first held (time.time()); raises what the watch met."""
        self.join(self.timeout + 10)
        if self.error is not None:
            raise self.error
        if self.seen_at is None:
            raise Deadline(f"{self.what}: the watch did not finish")
        return self.seen_at


def history(sfn, execution_arn: str) -> list[dict]:
    events, token = [], None
    while True:
        kwargs = {"executionArn": execution_arn, "maxResults": 1000}
        if token:
            kwargs["nextToken"] = token
        page = sfn.get_execution_history(**kwargs)
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def state_events(events, kind: str, state: str) -> list[dict]:
    """The StateEntered/StateExited events (kind "Entered"/"Exited") of a state."""
    key = "stateEnteredEventDetails" if kind == "Entered" else "stateExitedEventDetails"
    return [e for e in events if e.get(key, {}).get("name") == state]


def task_errors(events) -> list[str]:
    """The errors of the execution's failed tasks, in order."""
    out = []
    for e in events:
        for key in ("taskFailedEventDetails", "lambdaFunctionFailedEventDetails"):
            if key in e:
                out.append(e[key].get("error", ""))
    return out
