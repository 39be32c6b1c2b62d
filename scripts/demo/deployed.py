"""`make demo`: sfn-lock's stack deployed on this machine and run as a user
runs it, in about a minute, with no AWS account.

Runs inside scripts/deployed-stack.sh, which starts ministack (a local AWS)
on a free 127.0.0.1 port with dummy credentials and AWS_ENDPOINT_URL set.
template.yaml is packaged and deployed unmodified by the deployed tier's own
code (tests/deployed/deploy.py); every step after that goes through the AWS
APIs (Step Functions, DynamoDB, CloudWatch Logs) or the sfn-lock CLI:

  1. the queued state machine: A holds the lock, B waits in its queue and is
     handed the lock when A releases; C (skip-if-running) skips meanwhile;
  2. D (the locked state machine) is stopped while it holds the lock; the
     stack's rule, delayed queue, event source mapping and sweep free it;
  3. the CLI: a command run under the lock, the state machines queueing and
     skipping behind it, status and list.

    scripts/deployed-stack.sh .venv-ministack/bin/python scripts/demo/deployed.py
"""

from __future__ import annotations

import os
import sys

from cli import Cli, command_line
from machines import queue_and_skip, stopped_and_swept
from stack import build, deploy_stack
from story import Story

FIRST_RUN = ("first run on a new machine: the .venv-ministack tools (under 30 s) and a debug build "
             "of the workspace (about 2 min on 2 cores); after that, about a minute")


def main() -> int:
    story = Story()
    print("sfn-lock demo: the stack deployed into a local AWS (ministack at "
          f"{os.environ['AWS_ENDPOINT_URL']}), its state machines on one lock, then the CLI")
    print(f"({FIRST_RUN})")
    try:
        story.act("0. The stack")
        build(story)
        stack = deploy_stack(story)
        cli = Cli(stack, story)
        queue_and_skip(stack, story)
        stopped_and_swept(stack, story, cli.status)
        command_line(stack, story, cli)
    except Exception as error:  # noqa: BLE001  (any failure: say it and where to look)
        story.fail(error, os.environ.get("SFN_LOCK_DEPLOYED_LOGS"))
        return 1
    print(f"\nsfn-lock demo: done in {story.elapsed():.0f} s. The same in a test: make deployed-test "
          "(tests/deployed/); deploying to AWS: docs/deploy.md.")
    return 0


if __name__ == "__main__":
    if not os.environ.get("AWS_ENDPOINT_URL", "").startswith("http://127.0.0.1:"):
        sys.exit("demo: runs against the local emulator only: make demo (scripts/deployed-stack.sh)")
    sys.exit(main())
