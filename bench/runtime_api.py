"""A local AWS Lambda Runtime API that times the function process it serves.

One `RuntimeApi` serves one function process (as one Lambda execution
environment serves one process), on a free 127.0.0.1 port, with the endpoints
the runtimes call:

  GET  /2018-06-01/runtime/invocation/next
  POST /2018-06-01/runtime/invocation/{id}/response
  POST /2018-06-01/runtime/invocation/{id}/error
  POST /2018-06-01/runtime/init/error

and the standard headers on each invocation (Lambda-Runtime-Aws-Request-Id,
-Deadline-Ms, -Invoked-Function-Arn, -Trace-Id).

What it measures, all on time.perf_counter_ns (monotonic):
  cold start    from just before the process is spawned to the moment its first
                GET /next arrives (the runtime's init is done: everything the
                function does before asking for work, imports and SDK set-up
                included);
  invoke        from the moment an event is made available to a waiting
                GET /next to the moment the function's response (or error) has
                been read in full;
  peak RSS      VmHWM from /proc/<pid>/status, read before the process ends.

Why the standard library's ThreadingHTTPServer: it needs no install, and both
runtimes under test (the Rust `lambda_runtime` crate on hyper, and the Python
`awslambdaric` on its C client) see the very same server, so its own cost is
identical on both sides of every ratio. That cost is measured too: an echo
function under each runtime gives the floor of one invoke through this server.
HTTP/1.1 keep-alive and TCP_NODELAY keep it small (without TCP_NODELAY a
response written in pieces can wait on a delayed ACK, about 40 ms).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/2018-06-01/runtime"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:{name}"


class HarnessError(RuntimeError):
    """The harness, or the function process under it, broke (not a slow figure)."""


@dataclass
class Invocation:
    request_id: str
    body: bytes
    deadline_ms: int
    made_available_ns: int = 0
    delivered_ns: int = 0
    done_ns: int = 0
    kind: str = ""  # "response" or "error"
    result: bytes = b""
    error_type: str = ""
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def latency_ms(self) -> float:
        return (self.done_ns - self.made_available_ns) / 1e6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real Runtime API
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):  # noqa: N802 - http.server's naming
        arrived = time.perf_counter_ns()
        api = self.server.api
        if self.path != f"{PREFIX}/invocation/next":
            self._reply(404, b'{"errorMessage":"no such endpoint"}')
            return
        api._next_arrived(arrived)
        while True:
            try:
                invocation = api._pending.get(timeout=0.2)
                break
            except queue.Empty:
                if api._stopping.is_set():
                    self.close_connection = True
                    return
        invocation.delivered_ns = time.perf_counter_ns()
        trace = f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=0"
        self._reply(
            200,
            invocation.body,
            {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": api.function_arn,
                "Lambda-Runtime-Trace-Id": trace,
            },
        )

    def do_POST(self):  # noqa: N802
        body = self._read_body()
        received = time.perf_counter_ns()
        api = self.server.api
        path = self.path
        if path == f"{PREFIX}/init/error":
            api.init_error = body.decode("utf-8", "replace")
            self._reply(202, b'{"status":"OK"}')
            return
        parts = path[len(PREFIX) :].strip("/").split("/")
        if len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
            invocation = api._in_flight.pop(parts[1], None)
            if invocation is None:
                self._reply(400, b'{"errorMessage":"unknown request id"}')
                return
            invocation.kind = parts[2]
            invocation.result = body
            invocation.error_type = self.headers.get("Lambda-Runtime-Function-Error-Type", "")
            invocation.done_ns = received
            invocation.done.set()
            self._reply(202, b'{"status":"OK"}')
            return
        self._reply(404, b'{"errorMessage":"no such endpoint"}')


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "RuntimeApi"

    def handle_error(self, request, client_address):
        # A function process killed mid-request (the end of every measurement)
        # breaks its connection; that is expected, not worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


class RuntimeApi:
    """The Runtime API for one function process, plus that process's timings."""

    def __init__(self, function_name: str):
        self.function_arn = FUNCTION_ARN.format(name=function_name)
        self._pending: queue.Queue[Invocation] = queue.Queue()
        self._in_flight: dict[str, Invocation] = {}
        self._stopping = threading.Event()
        self._first_next = threading.Event()
        self.first_next_ns = 0
        self.init_error: str | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def _next_arrived(self, arrived_ns: int) -> None:
        if not self._first_next.is_set():
            self.first_next_ns = arrived_ns
            self._first_next.set()

    def wait_first_next(self, timeout: float) -> bool:
        return self._first_next.wait(timeout)

    def invoke(self, event, timeout: float = 15.0) -> Invocation:
        """Makes one event available and waits for the function's answer."""
        body = event if isinstance(event, bytes) else json.dumps(event).encode()
        invocation = Invocation(
            request_id=str(uuid.uuid4()),
            body=body,
            deadline_ms=int(time.time() * 1000 + timeout * 1000),
        )
        self._in_flight[invocation.request_id] = invocation
        invocation.made_available_ns = time.perf_counter_ns()
        self._pending.put(invocation)
        if not invocation.done.wait(timeout):
            self._in_flight.pop(invocation.request_id, None)
            raise HarnessError(f"{self.function_arn}: no answer within {timeout} s")
        return invocation

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()


def read_cpu_ns(pid: int) -> int:
    """CPU time the process has run so far, all its threads, in ns (schedstat).

    Unlike wall time this hardly moves when other work shares the machine, so it
    is the steadier measure of what a function itself costs per invoke."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                total += int(schedstat.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total


def read_peak_rss_kib(pid: int) -> int:
    """VmHWM (peak resident set) of a live process, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise HarnessError(f"no VmHWM for pid {pid}")


class FunctionProcess:
    """One function process under its own RuntimeApi.

    `start()` spawns it and returns the cold start in ms (spawn to first
    GET /next). The process runs in its own session so that `stop()` ends it and
    anything it started, by its id.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: str, cwd: str | None = None):
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.cwd = cwd
        self.api = RuntimeApi(name)
        self.process: subprocess.Popen | None = None
        self.cold_start_ms: float | None = None

    def start(self, timeout: float = 30.0) -> float:
        env = dict(self.env)
        env["AWS_LAMBDA_RUNTIME_API"] = self.api.address
        env.setdefault("AWS_LAMBDA_FUNCTION_NAME", self.name)
        env.setdefault("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        env.setdefault("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        log = open(self.log_path, "ab")
        try:
            spawned_ns = time.perf_counter_ns()
            self.process = subprocess.Popen(
                self.argv,
                env=env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while not self.api.wait_first_next(0.05):
            if self.process.poll() is not None:
                raise HarnessError(
                    f"{self.name} exited with {self.process.returncode} before asking for work"
                    f" (init error: {self.api.init_error}); see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise HarnessError(f"{self.name} did not ask for work within {timeout} s; see {self.log_path}")
        self.cold_start_ms = (self.api.first_next_ns - spawned_ns) / 1e6
        return self.cold_start_ms

    def invoke(self, event, timeout: float = 15.0) -> Invocation:
        if self.process is None or self.process.poll() is not None:
            raise HarnessError(f"{self.name} is not running; see {self.log_path}")
        return self.api.invoke(event, timeout)

    def peak_rss_kib(self) -> int:
        if self.process is None or self.process.poll() is not None:
            raise HarnessError(f"{self.name} is not running; see {self.log_path}")
        return read_peak_rss_kib(self.process.pid)

    def cpu_ns(self) -> int:
        if self.process is None or self.process.poll() is not None:
            raise HarnessError(f"{self.name} is not running; see {self.log_path}")
        return read_cpu_ns(self.process.pid)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
        self.api.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
