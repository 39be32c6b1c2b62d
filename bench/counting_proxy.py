"""A counting HTTP proxy in front of the local AWS endpoint (moto).

The functions under test get this proxy as their endpoint (AWS_ENDPOINT_URL_DYNAMODB,
_S3, _SSM, _SFN), so every request they make crosses it and is counted at the
wire by its operation, retries included: the SDK's own view of how many calls it
made plays no part. The operation is

  - for the JSON protocols (DynamoDB, SSM, Step Functions) the X-Amz-Target
    header's operation, e.g. DynamoDB_20120810.UpdateItem -> "UpdateItem"; for
    SSM with what the named parameters are (the lock store's layout, ssm.rs):
    "PutParameter (generation)", "PutParameter (current)" (the newest-generation
    hint), "PutParameter (marker)" (an owner marker, `.owners/` in the name),
    "GetParameters (generations)" (the probe ahead of the hint),
    "GetParametersByPath (generations)" (a lock's generations listed),
    "GetParametersByPath (markers)" (the sweep), "DeleteParameters (marker)";
  - for S3 (path-style, no X-Amz-Target) the HTTP method's operation and what the
    key is: "GetObject (lock)", "PutObject (lock)", "PutObject (marker)" (`.owners/`
    in the key), "DeleteObject (marker)", or "ListObjectsV2" for a listing.

Requests are forwarded byte for byte: the body as received (an S3 PUT's
`aws-chunked` body with its trailing checksum included: its Content-Length is the
encoded length, and Content-Encoding, X-Amz-Decoded-Content-Length and
X-Amz-Trailer go along unchanged), every header but the hop-by-hop ones
(If-Match, If-None-Match, the signature's headers and Host stay as they are), and
the answer's headers (ETag included) as moto sent them. A body sent with
Transfer-Encoding: chunked is de-chunked and forwarded with its Content-Length.
"""

from __future__ import annotations

import collections
import http.client
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection",
              "expect"}
# A lock generation's parameter name ends in its 20-digit number (ssm.rs, GENERATION_DIGITS).
GENERATION = re.compile(r"/\d{20}$")
S3_METHODS = {"GET": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject", "HEAD": "HeadObject"}


def _ssm_kind(names: list[str]) -> str:
    """What SSM parameter names are in the lock store's layout (ssm.rs): `marker`,
    `current`, `generation` (plural when a request names several)."""
    kinds = []
    for name in names:
        if "/.owners/" in name:
            kind = "marker"
        elif name.endswith("/current"):
            kind = "current"
        elif GENERATION.search(name):
            kind = "generation"
        else:
            kind = "other"
        if kind not in kinds:
            kinds.append(kind)
    if len(names) > 1:
        kinds = [kind + "s" if kind in ("marker", "generation") else kind for kind in kinds]
    return "+".join(kinds)


def operation(method: str, path: str, headers, body: bytes) -> str:
    """The operation a request is counted as (see the module's docstring)."""
    target = headers.get("X-Amz-Target")
    if target:
        service, _, op = target.rpartition(".")
        if service == "AmazonSSM":
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                return op
            if "Name" in request:
                kind = _ssm_kind([request["Name"]])
            elif "Names" in request:
                kind = _ssm_kind(request["Names"])
            elif "Path" in request:
                # A listing: an owner's markers (the sweep) or a lock's generations.
                kind = "markers" if "/.owners/" in request["Path"] else "generations"
            else:
                return op
            return f"{op} ({kind})"
        return op
    # S3, path-style: /BUCKET/KEY?QUERY (the functions force path style on a local endpoint).
    url = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
    _, _, key = urllib.parse.unquote(url.path).lstrip("/").partition("/")
    if method == "GET" and (not key or "list-type" in query):
        return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    if method in S3_METHODS and key:
        return f"{S3_METHODS[method]} ({'marker' if '.owners/' in key else 'lock'})"
    return f"{method} {url.path}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # Trailer fields (none expected) up to the empty line.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after the chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self):
        body = self._read_body()
        self.server.proxy._count(operation(self.command, self.path, self.headers, body))
        upstream = http.client.HTTPConnection(*self.server.proxy.upstream, timeout=30)
        try:
            # A list, not a dict: a header sent twice is forwarded twice.
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
            if body or self.command in ("POST", "PUT"):
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
                headers.append(("Content-Length", str(len(body))))
            # skip_host/skip_accept_encoding: Host and the rest go exactly as received.
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                upstream.putheader(name, value)
            upstream.endheaders(body if body else None)
            response = upstream.getresponse()
            payload = response.read()
            self.send_response(response.status, response.reason)
            no_body = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
            for name, value in response.getheaders():
                lower = name.lower()
                if lower in HOP_BY_HOP or (lower == "content-length" and not self.command == "HEAD"):
                    continue
                self.send_header(name, value)
            if not no_body:
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if not no_body:
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up on this attempt (its timeout); it was counted,
            # and its retry will be too.
            self.close_connection = True
        finally:
            upstream.close()

    do_POST = _forward
    do_GET = _forward
    do_PUT = _forward
    do_DELETE = _forward
    do_HEAD = _forward


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
