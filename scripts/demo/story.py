"""How the demo speaks: one line per thing that happened, stamped with the
seconds since the demo started, executions called by a letter instead of
their 120-character ARNs, and a loud stop when something did not happen as
told (the demo checks what it says: a story that is not true must not pass)."""

from __future__ import annotations

import sys
import time


class DemoFailed(Exception):
    """What the demo expected and what it saw instead."""


class Story:
    def __init__(self):
        self.started = time.monotonic()
        # Execution ARN -> the letter the story calls it by.
        self.names: dict[str, str] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def act(self, title: str) -> None:
        print(f"\n== {title}", flush=True)

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():5.1f} s] {text}", flush=True)

    def aside(self, text: str) -> None:
        """Background the newcomer needs for the next lines, unstamped."""
        for line in text.splitlines():
            print(f"          {line}", flush=True)

    def shell(self, command: str | None, output: str) -> None:
        """A command line as typed (None: more output of the last one), then
        its output indented under it."""
        if command is not None:
            print(f"          $ {command}", flush=True)
        for line in output.rstrip("\n").splitlines():
            print(f"            {line}", flush=True)

    def name(self, arn: str, letter: str) -> str:
        self.names[arn] = letter
        return letter

    def who(self, owner: str) -> str:
        """An owner as the story calls it: an execution's letter, or the
        owner string itself (the CLI's host:pid:random)."""
        if owner in self.names:
            return f"execution {self.names[owner]}"
        return owner

    def expect(self, condition, what: str) -> None:
        if not condition:
            raise DemoFailed(what)

    def fail(self, error: Exception, logs: str | None) -> None:
        print(f"\ndemo: FAILED after {self.elapsed():.1f} s: {error}", file=sys.stderr, flush=True)
        if logs:
            print(f"demo: the emulator's and the functions' output: {logs}/ministack.log", file=sys.stderr)
