"""moto server that handles one request at a time.

Stock moto checks a condition and writes the item in separate Python steps
with no lock, so two concurrent conditional writes to one item can both pass.
Real DynamoDB never allows that. The lock's concurrency tests must run against
a server that is atomic per item as DynamoDB is, so this one serialises every
request behind a single lock (coarser than DynamoDB, equally correct).

It also answers GET /_sfn_lock/in-flight (outside the lock) with the number of
requests received and not yet answered: after a SIGSTOP/SIGCONT pause, a test
waits for that to reach 0, so no stalled write lands after it has looked.

Usage: python dynamodb_server.py PORT_FILE
Listens on a port the system picks on 127.0.0.1 and, once listening, writes
that port to PORT_FILE (a port picked by the caller beforehand could be taken
by another process before this one binds it).
"""

import os
import sys
import threading

from werkzeug.serving import make_server

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


class NoDelayRequestHandler(MotoRequestHandler):
    # Without TCP_NODELAY a response written in pieces waits on the client's
    # delayed ACK: about 40 ms per request instead of one.
    disable_nagle_algorithm = True


def main() -> None:
    port_file = sys.argv[1]
    moto_app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()
    counting = threading.Lock()
    in_flight = 0

    def serialised_app(environ, start_response):
        nonlocal in_flight
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
