"""The sfn-lock command line (target/debug/sfn-lock, built by deploy.py's
cargo command) run as a real process against the deployed stack's store, as a
user runs it: --store is the stack's LockStoreUrl output; AWS_ENDPOINT_URL
(scripts/deployed-stack.sh) points its SDK calls, SendTaskSuccess included,
at the emulator."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from deploy import ROOT
from lockstate import poll

CLI = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "sfn-lock"


def run(store_url: str, subcommand: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """One CLI command to its end; its exit status is the caller's to judge.
    --store right after the subcommand: never inside a `run`'s COMMAND."""
    return subprocess.run([str(CLI), subcommand, "--store", store_url, *args], capture_output=True,
                          text=True, timeout=timeout)


def status(store_url: str, lock_name: str) -> dict:
    """`sfn-lock status NAME --json`."""
    done = run(store_url, "status", lock_name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stderr_lines(done: subprocess.CompletedProcess) -> list[dict]:
    """The JSON lines the CLI logged on stderr (forced_release, ...)."""
    out = []
    for line in done.stderr.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


class Holder:
    """`sfn-lock run LOCK -- COMMAND` in the background, holding the lock
    while its command waits for a file the test writes: the test decides
    when the command ends, never a timer. The command writes the fencing token
    the CLI hands it (SFN_LOCK_FENCING_TOKEN) when it starts."""

    def __init__(self, store_url: str, lock_name: str, owner: str, *options: str):
        self.dir = Path(tempfile.mkdtemp(prefix="cli-holder-"))
        self.owner = owner
        command = (f'echo "$SFN_LOCK_FENCING_TOKEN" > {self.dir}/token.tmp && '
                   f'mv {self.dir}/token.tmp {self.dir}/token && '
                   f'while [ ! -e {self.dir}/go ]; do sleep 0.05; done')
        self.process = subprocess.Popen(
            [str(CLI), "run", "--store", store_url, "--owner", owner, *options, lock_name,
             "--", "sh", "-c", command],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def token(self, timeout: float = 60) -> int:
        """Waits until the command runs under the lock; its fencing token."""
        def started():
            if self.process.poll() is not None:
                raise AssertionError(f"sfn-lock run ended ({self.process.returncode}) before its command "
                                     f"ran: {self.process.stderr.read()}")
            path = self.dir / "token"
            return path.exists() and int(path.read_text())

        return poll(f"sfn-lock run --owner {self.owner} holds the lock", started, timeout, pause=0.05)

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Lets the command end; the CLI's exit status and stderr once it has
        released the lock and exited."""
        (self.dir / "go").touch()
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, err

    def stop(self):
        """Teardown of a scenario that failed midway: nothing left running."""
        if self.process.poll() is None:
            (self.dir / "go").touch()
            try:
                self.process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()
