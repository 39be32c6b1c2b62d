"""The sfn-lock command line on the deployed stack's lock, as a user runs it:
target/debug/sfn-lock as a real process, pointed at the emulator by the
standard AWS_ENDPOINT_URL and at the lock by the stack's LockStoreUrl output.
A command run under the lock shares it with the state machines: a queued
execution waits behind it and is handed the lock when it ends, a
skip-if-running execution skips."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from machines import QUEUED, granted_token, skipped
from stack import LOCK_NAME, ROOT, poll

BINARY = ROOT / "target" / "debug" / "sfn-lock"
# No conflict: 111, as setlock answers (docs/cli.md).
NOT_OBTAINED = 111
# The command run under the lock: says what it sees, then waits for the demo
# to tell it to end (a file appearing), so the demo decides how long it holds.
COMMAND = ('echo "nightly-etl.sh runs under the lock: fencing token $SFN_LOCK_FENCING_TOKEN, '
           'owner $SFN_LOCK_OWNER"; while [ ! -e "$1" ]; do sleep 0.1; done; echo "nightly-etl.sh done"')


class Cli:
    def __init__(self, stack, story):
        self.story = story
        self.stack = stack
        # AWS_ENDPOINT_URL, the dummy credentials and the Region come from
        # scripts/deployed-stack.sh; the store is the stack's output.
        self.env = dict(os.environ, LOCK_STORE_URL=stack.outputs["LockStoreUrl"])

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(BINARY), *args], env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            self.story.expect(False, f"sfn-lock {' '.join(args)}: exit {done.returncode}: {done.stderr}")
        return done

    def show(self, *args: str) -> subprocess.CompletedProcess:
        done = self.run(*args)
        self.story.shell(f"sfn-lock {' '.join(args)}", done.stdout + done.stderr)
        return done

    def status(self, why: str) -> None:
        self.story.say(f"the command line sees it ({why}):")
        self.show("status", LOCK_NAME)

    def holder(self) -> dict:
        holders = json.loads(self.run("status", "--json", LOCK_NAME).stdout)["holders"]
        return holders[0] if holders else {}


def command_line(stack, story, cli: Cli) -> None:
    story.act("3. The command line on the same lock")
    story.aside(f"target/debug/sfn-lock, a real process: AWS_ENDPOINT_URL={os.environ['AWS_ENDPOINT_URL']}, "
                f"LOCK_STORE_URL={stack.outputs['LockStoreUrl']}\n(the stack's LockStoreUrl output)")
    with tempfile.TemporaryDirectory() as scratch:
        done_flag = Path(scratch) / "done"
        story.say("a cron job takes the workflows' lock (nightly-etl.sh here: a sh -c that says what it sees, "
                  "then runs until the demo lets it end):")
        story.shell(f"sfn-lock run {LOCK_NAME} -- nightly-etl.sh", "")
        run = subprocess.Popen([str(BINARY), "run", LOCK_NAME, "--", "sh", "-c", COMMAND,
                                "nightly-etl.sh", str(done_flag)],
                               env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            holding_under_the_command(stack, story, cli, run, done_flag)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()

    story.say(f"{LOCK_NAME} at the end:")
    cli.show("status", LOCK_NAME)
    cli.show("list")
    wrap(story, cli)


def wrap(story, cli: Cli) -> None:
    """The lock put around a state machine of your own: wrap prints the
    definition with the lock's states around yours (docs/cli.md)."""
    sample = "tests/e2e/fixtures/wrap-sample.asl.json"
    done = cli.run("wrap", "--lock-name", LOCK_NAME, str(ROOT / sample))
    definition = json.loads(done.stdout)
    branch = definition["States"]["Run Workload Under Lock"]["Branches"][0]["States"]
    story.say("and for a state machine of your own, the same lock around its states:")
    story.shell(f"sfn-lock wrap --lock-name {LOCK_NAME} {sample} > locked.asl.json",
                f"the lock's states: {', '.join(definition['States'])}\n"
                f"yours, under the lock: {', '.join(branch)}\n"
                f"TimeoutSeconds {definition['TimeoutSeconds']}: the sample's 60 + the wait for the lock "
                "+ the lock's own states")


def holding_under_the_command(stack, story, cli, run, done_flag) -> None:
    said = run.stdout.readline()
    if not said:
        story.expect(False, f"sfn-lock run ended before its command spoke: {run.communicate()[1]}")
    story.shell(None, said)
    owner = cli.holder().get("owner")
    story.expect(owner and owner in said, f"the lock's holder {owner!r} is not the command's")
    command_token = cli.holder()["fencingToken"]

    e = stack.start(QUEUED, "E", 1)
    poll("execution E queued", lambda: stack.queue_length() == 1, timeout=30, pause=0.1)
    story.say("execution E (queued workflow) started: it waits in the lock's queue behind the command")
    skipped(stack, story, "F", owner)
    cli.status("held by the command, E in the queue")
    cli.show("list")

    second = cli.run("run", "-n", LOCK_NAME, "--", "true", check=False)
    story.expect(second.returncode == NOT_OBTAINED, f"a second run got {second.returncode}: {second.stderr}")
    story.shell(f"sfn-lock run -n {LOCK_NAME} -- true; echo $?   # a second run, no waiting",
                f"{second.stderr}{second.returncode}  (not obtained)")

    done_flag.touch()
    out, err = run.communicate(timeout=60)
    story.say("the demo lets nightly-etl.sh end:")
    story.shell(None, out + err)
    story.expect(run.returncode == 0, f"sfn-lock run exited {run.returncode}")
    stack.succeeded(e)
    token_e = granted_token(stack, e)
    story.expect(token_e > command_token, f"E's token {token_e} not above the command's {command_token}")
    story.say(f"the command ended and sfn-lock released: the release handed the lock to E and woke it "
              f"(SendTaskSuccess, as release-lock does); E ran under fencing token {token_e} and SUCCEEDED")
