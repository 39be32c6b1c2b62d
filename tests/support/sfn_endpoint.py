"""A local Step Functions endpoint for callback (.waitForTaskToken) tasks.

moto keeps no task tokens, and aws-local-stepfunctions runs no callback task,
so this server plays Step Functions' side of the callback pattern: the e2e
harness mints a token when a Task state starts, the binaries complete it with
SendTaskSuccess / SendTaskFailure (AWS JSON 1.0, as aws-sdk-sfn sends them),
and the harness long-polls the token's outcome. Every other Step Functions
request (DescribeExecution, CreateStateMachine, ...) is forwarded unchanged to
moto, so AWS_ENDPOINT_URL_SFN can point here for everything.

Errors are shaped as AWS sends them: HTTP 400, {"__type": "<namespace>#Name",
"message": ...}; the SDKs keep what follows the '#'.

Control routes for tests (JSON bodies):
  POST /_local/tokens {"execution", "state", "timeoutSeconds"?} -> {"taskToken"}
  GET  /_local/tokens/<token>/outcome?waitSeconds=s -> {"status": "OPEN" | "SUCCEEDED"
       (+ "output") | "FAILED" (+ "error", "cause") | "TIMED_OUT" | "STOPPED" | "CLOSED"}
  POST /_local/tokens/<token>/close {"reason": "timed_out" | "stopped" | ...} -> the
       outcome after the close (a completed token stays completed)
  POST /_local/faults {"action", "count", "status": 500 | "drop" | "lose_answer" | "throttle", "execution"?}
  GET  /_local/calls -> [{"action", "taskToken", "result", "at"}]
(<token> is percent-encoded: real tokens are base64 and contain '/' and '+'.)

Usage: python sfn_endpoint.py PORT_FILE MOTO_URL
"""

import base64
import http.client
import json
import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

NAMESPACE = "com.amazonaws.swf.service.v2.model#"
MAX_TOKEN = 2048  # SendTask* taskToken: length 1..2048 (API reference)
MAX_OUTPUT = 262144  # SendTaskSuccess output: 256 KiB of UTF-8
CALLBACKS = ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat")
# AWS allows a Task up to 99999999 s when it gives no TimeoutSeconds.
DEFAULT_TIMEOUT = 99999999.0


@dataclass
class Token:
    execution: str
    state: str
    deadline: float  # time.monotonic()
    status: str = "OPEN"
    output: str | None = None
    error: str | None = None
    cause: str | None = None

    def outcome(self) -> dict:
        fields = {"status": self.status, "output": self.output, "error": self.error, "cause": self.cause}
        return {key: value for key, value in fields.items() if value is not None}


class State:
    """Every token, fault and call, behind one lock (a condition for the long polls)."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.tokens: dict[str, Token] = {}
        self.faults: dict[str, list] = {}
        self.calls: list[dict] = []

    def expire(self, token: Token) -> None:
        # A token whose Task ran out of time is closed when next looked at.
        if token.status == "OPEN" and time.monotonic() >= token.deadline:
            token.status = "TIMED_OUT"
            self.changed.notify_all()


STATE = State()


def log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def aws_error(name: str, message: str, status: int = 400) -> tuple[int, dict]:
    return status, {"__type": NAMESPACE + name, "message": message}


def callback(action: str, body: dict) -> tuple[int, dict]:
    """SendTaskSuccess / Failure / Heartbeat, decided under the lock (so atomic)."""
    token_text = body.get("taskToken")
    if not isinstance(token_text, str) or not 1 <= len(token_text) <= MAX_TOKEN:
        return aws_error("InvalidToken", "Invalid token")
    token = STATE.tokens.get(token_text)
    if token is None:
        return aws_error("TaskDoesNotExist", "Task does not exist")
    STATE.expire(token)
    if token.status != "OPEN":
        # Completed, timed out or stopped: AWS answers TaskTimedOut for all of them.
        return aws_error("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'")
    if action == "SendTaskSuccess":
        output = body.get("output")
        try:
            if not isinstance(output, str) or len(output.encode()) > MAX_OUTPUT:
                raise ValueError("not a string of at most 256 KiB")
            json.loads(output)
        except ValueError as error:
            return aws_error("InvalidOutput", f"Invalid Output: {error}")
        token.status, token.output = "SUCCEEDED", output
    elif action == "SendTaskFailure":
        token.status, token.error, token.cause = "FAILED", body.get("error"), body.get("cause")
    STATE.changed.notify_all()
    return 200, {}


def control(method: str, parts: list[str], query: dict, body: dict) -> tuple[int, object]:
    """The /_local/ routes, under the lock."""
    if method == "POST" and parts == ["tokens"]:
        # Random base64 (with '/' and '+', as real tokens have), 700 to 1000 characters.
        text = base64.b64encode(secrets.token_bytes(525 + secrets.randbelow(226))).decode()
        timeout = float(body.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        STATE.tokens[text] = Token(body.get("execution", ""), body.get("state", ""), time.monotonic() + timeout)
        log(f"minted ...{text[-12:]} for {body.get('execution')} {body.get('state')!r}, {timeout:g} s")
        return 200, {"taskToken": text}
    if method == "POST" and parts == ["faults"]:
        key = body["action"] + (f"@{body['execution']}" if body.get("execution") else "")
        STATE.faults.setdefault(key, []).extend([body.get("status", 500)] * int(body.get("count", 1)))
        return 200, {}
    if method == "GET" and parts == ["calls"]:
        return 200, list(STATE.calls)
    text = unquote(parts[1]) if len(parts) == 3 and parts[0] == "tokens" else ""
    token = STATE.tokens.get(text)
    if token is not None and method == "POST" and parts[2] == "close":
        STATE.expire(token)
        if token.status == "OPEN":
            token.status = {"timed_out": "TIMED_OUT", "stopped": "STOPPED"}.get(body.get("reason"), "CLOSED")
            log(f"closed ...{text[-12:]}: {token.status}")
            STATE.changed.notify_all()
        return 200, token.outcome()
    if token is not None and method == "GET" and parts[2] == "outcome":
        until = time.monotonic() + float(query.get("waitSeconds", ["0"])[0])
        while True:
            STATE.expire(token)
            now = time.monotonic()
            if token.status != "OPEN" or now >= until:
                return 200, token.outcome()
            STATE.changed.wait(min(until, token.deadline) - now)
    return 404, {"message": f"no such route or token: {method} /_local/{'/'.join(parts)[:80]}"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK expects
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall per answer
    moto_url = ""

    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass  # one line per callback instead (log())

    def reply(self, status: int, body: object, content_type: str = "application/x-amz-json-1.0") -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        self.route("GET", self.read_body())

    def do_POST(self) -> None:
        self.route("POST", self.read_body())

    def route(self, method: str, raw: bytes) -> None:
        url = urlsplit(self.path)
        target = self.headers.get("X-Amz-Target", "")
        action = target.removeprefix("AWSStepFunctions.")
        if method == "POST" and url.path == "/" and action in CALLBACKS:
            self.callback(action, raw)
        elif url.path.startswith("/_local/"):
            body = json.loads(raw) if raw else {}
            self.control(method, url.path.split("/")[2:], parse_qs(url.query), body)
        else:
            self.forward(method, raw)

    def callback(self, action: str, raw: bytes) -> None:
        body = json.loads(raw or b"{}")
        with STATE.changed:
            # A fault for this token's execution first (tests run side by side), then any.
            token = STATE.tokens.get(body.get("taskToken") or "")
            scoped = STATE.faults.get(f"{action}@{token.execution}", []) if token else []
            faults = scoped or STATE.faults.get(action, [])
            fault = faults.pop(0) if faults else None
            if fault in (None, "lose_answer"):
                status, answer = callback(action, body)
                result = answer["__type"].split("#")[1] if status != 200 else "ok"
            if fault == "throttle":
                # Not processed, and said so: the token stays open.
                status, answer = aws_error("ThrottlingException", "Rate exceeded")
                result = "fault:throttle"
            elif fault is not None:
                # AWS's common errors: InternalFailure is a 500, ServiceUnavailable a 503.
                kind = "InternalFailure" if fault == 500 else "ServiceUnavailable"
                status, answer = 500, {"__type": kind, "message": "injected fault"}
                result = f"fault:{fault}" if fault != "lose_answer" else f"fault:lose_answer ({result})"
            STATE.calls.append({"action": action, "taskToken": body.get("taskToken"), "result": result, "at": time.time()})
        log(f"{action} ...{str(body.get('taskToken'))[-12:]} -> {result}")
        if fault in ("drop", "lose_answer"):
            # The connection closes with no answer: the client sees an I/O error.
            self.close_connection = True
        else:
            self.reply(status if fault in (None, "throttle") else int(fault), answer)

    def control(self, method: str, parts: list[str], query: dict, body: dict) -> None:
        with STATE.changed:
            status, answer = control(method, parts, query, body)
        self.reply(status, answer, "application/json")

    def forward(self, method: str, raw: bytes) -> None:
        """Everything else goes to moto as it came, and its answer comes back as it went."""
        moto = urlsplit(self.moto_url)
        connection = http.client.HTTPConnection(moto.hostname, moto.port, timeout=60)
        try:
            skip = {"connection", "keep-alive", "transfer-encoding"}
            headers = {name: value for name, value in self.headers.items() if name.lower() not in skip}
            connection.request(method, self.path, body=raw, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in skip | {"content-length", "server", "date"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    port_file, Handler.moto_url = sys.argv[1], sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    # Written whole, then renamed: the waiting script never reads half a port.
    os.replace(port_file + ".tmp", port_file)
    log(f"listening on 127.0.0.1:{server.server_address[1]}, forwarding to {Handler.moto_url}")
    server.serve_forever()


if __name__ == "__main__":
    main()
