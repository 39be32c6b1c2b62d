"""moto server that handles one request at a time.

Stock moto checks a condition and writes the item in separate Python steps
with no lock, so two concurrent conditional writes to one item can both pass.
Real DynamoDB never allows that. The lock's concurrency tests must run against
a server that is atomic per item as DynamoDB is, so this one serialises every
request behind a single lock (coarser than DynamoDB, equally correct).

It also answers GET /_sfn_lock/in-flight (outside the lock) with the number of
requests received and not yet answered: after a SIGSTOP/SIGCONT pause, a test
waits for that to reach 0, so no stalled write lands after it has looked.

POST /_sfn_lock/ssm-clock with a body of SECONDS sets SSM's clock that far
ahead of the host's: the LastModifiedDate of the parameters written from then
on, and the Date header of SSM's answers. A test puts it back to 0 when done
(moving back only delays the SSM store's deletions), so that later tests, the
CLI's clock check among them, see SSM's clock as the host's. The SSM store
judges time by these alone (`aws/service_clock.rs`), so a test makes minutes of
service time pass at once: a stalled writer, generations old enough to delete.
Only SSM sees it: DynamoDB, S3 and SQS keep the host's clock.

Usage: python dynamodb_server.py PORT_FILE
Listens on a port the system picks on 127.0.0.1 and, once listening, writes
that port to PORT_FILE (a port picked by the caller beforehand could be taken
by another process before this one binds it).
"""

import datetime
import os
import sys
import threading
import time

from werkzeug.serving import make_server

import moto.ssm.models
from moto.core.utils import utcnow
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


# How far SSM's clock is ahead of the host's (POST /_sfn_lock/ssm-clock).
ssm_ahead = datetime.timedelta(0)


class NoDelayRequestHandler(MotoRequestHandler):
    # Without TCP_NODELAY a response written in pieces waits on the client's
    # delayed ACK: about 40 ms per request instead of one.
    disable_nagle_algorithm = True

    def date_time_string(self, timestamp=None):
        # The Date header of every answer; SSM's follows SSM's clock.
        target = self.headers.get("X-Amz-Target", "") if self.headers else ""
        if timestamp is None and target.startswith("AmazonSSM."):
            timestamp = time.time() + ssm_ahead.total_seconds()
        return super().date_time_string(timestamp)


def main() -> None:
    port_file = sys.argv[1]
    moto_app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()
    counting = threading.Lock()
    in_flight = 0
    moto.ssm.models.utcnow = lambda: utcnow() + ssm_ahead

    def ssm_clock(environ, start_response):
        global ssm_ahead
        length = int(environ.get("CONTENT_LENGTH") or 0)
        seconds = float(environ["wsgi.input"].read(length) or 0)
        with one_at_a_time:
            ssm_ahead = datetime.timedelta(seconds=seconds)
            body = str(ssm_ahead.total_seconds()).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    def serialised_app(environ, start_response):
        nonlocal in_flight
        if environ.get("PATH_INFO") == "/_sfn_lock/ssm-clock":
            return ssm_clock(environ, start_response)
        if environ.get("PATH_INFO") == "/_sfn_lock/in-flight":
            with counting:
                body = str(in_flight).encode()
            start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        with counting:
            in_flight += 1
        try:
            with one_at_a_time:
                # Drain the response inside the lock: the write happens while it is produced.
                return list(moto_app(environ, start_response))
        finally:
            with counting:
                in_flight -= 1

    server = make_server(
        "127.0.0.1",
        0,
        serialised_app,
        threaded=True,
        request_handler=NoDelayRequestHandler,
    )
    # moto builds URLs (SQS queue URLs) from MOTO_PORT.
    os.environ["MOTO_PORT"] = str(server.port)
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.port))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
