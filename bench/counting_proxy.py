"""A counting HTTP proxy in front of the DynamoDB endpoint.

The functions under test get this proxy as AWS_ENDPOINT_URL_DYNAMODB, so every
request they make crosses it and is counted at the wire by its operation (the
X-Amz-Target header, e.g. DynamoDB_20120810.UpdateItem), retries included:
the SDK's own view of how many calls it made plays no part.
"""

from __future__ import annotations

import collections
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def _forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        target = self.headers.get("X-Amz-Target", f"{self.command} {self.path}")
        operation = target.rsplit(".", 1)[-1]
        self.server.proxy._count(operation)
        upstream = http.client.HTTPConnection(*self.server.proxy.upstream, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            self.send_response(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        finally:
            upstream.close()

    do_POST = _forward
    do_GET = _forward


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: "CountingProxy"


class CountingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _count(self, operation: str) -> None:
        with self._lock:
            self._counts[operation] += 1

    def take(self) -> dict[str, int]:
        """The counts since the last take, by operation; resets them."""
        with self._lock:
            counts = dict(self._counts)
            self._counts.clear()
        return counts

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
