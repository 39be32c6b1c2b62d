"""The deployed tier's fixtures: template.yaml packaged once and deployed into
the emulator scripts/deployed-stack.sh runs (AWS_ENDPOINT_URL), once with the
default parameters and once per variant a test asks for. A line per deploy and
per scenario goes to stderr as it happens (`make test` shows it live); each
step's time is printed at the end of the run.

Two scenarios wait on the emulator's own clocks (the sweep's grace, the
scheduler's tick): they are started before the first test
(background.py) and checked by their tests at the end, so that their waits
overlap the other scenarios instead of adding to them."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import background  # noqa: E402
import deploy  # noqa: E402

TIMES: list[tuple[str, float]] = []
_CONFIG: pytest.Config | None = None


def progress(message: str):
    """One line on the real stderr, past pytest's capture: the run's progress
    shows while it runs, not in the report at the end."""
    capture = _CONFIG.pluginmanager.getplugin("capturemanager") if _CONFIG else None
    if capture is None:
        print(f"deployed: {message}", file=sys.stderr, flush=True)
        return
    with capture.global_and_fixture_disabled():
        print(f"deployed: {message}", file=sys.stderr, flush=True)


class timed:
    """Times a step into the summary and says it on stderr when it ends."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.start = time.monotonic()

    def __exit__(self, *exc):
        seconds = time.monotonic() - self.start
        TIMES.append((self.name, seconds))
        progress(f"{self.name}: {'failed' if exc[0] else 'done'} in {seconds:.1f} s")


def pytest_configure(config):
    global _CONFIG
    _CONFIG = config
    # https with IAM on (SFN_LOCK_DEPLOYED_AUTH, scripts/deployed-stack.sh).
    if not os.environ.get("AWS_ENDPOINT_URL", "").startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
        raise pytest.UsageError(
            "the deployed tier runs against the local emulator only: "
            "run it through scripts/deployed-stack.sh (make deployed-test)")


def pytest_runtest_logstart(nodeid, location):
    progress(f"scenario {nodeid.split('::')[-1]} ...")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome == "failed":
        name = report.nodeid.split("::")[-1]
        TIMES.append((f"scenario {name}", report.duration))
        progress(f"scenario {name}: {report.outcome} in {report.duration:.1f} s")


def pytest_sessionfinish(session):
    """IAM on: a function call ministack denied fails the run, named, even
    if no test noticed it (iam-calls.jsonl, iam_calls.py)."""
    import iam_calls
    if denied := iam_calls.not_allowed():
        progress("function calls not allowed (iam-calls.jsonl):\n  " + "\n  ".join(denied))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_sep("-", "deployed tier: time per step")
    for name, seconds in TIMES:
        terminalreporter.write_line(f"  {name:<60} {seconds:6.1f} s")
    for note in background.NOTES:
        terminalreporter.write_line(f"  {note}")


@pytest.fixture(scope="session")
def aws():
    return boto3.Session()


@pytest.fixture(scope="session")
def packaged(aws):
    logs = Path(os.environ.get("SFN_LOCK_DEPLOYED_LOGS", deploy.ROOT / "target"))
    with timed("package (cargo build check, zips, uploads)"):
        return deploy.package(aws, out_dir=logs / "package")


def _stack(aws, packaged, name, parameters):
    progress(f"deploy {name} {parameters or '(defaults)'} ...")
    with timed(f"deploy {name}"):
        outputs = deploy.deploy(name, packaged.template_url, parameters, aws)
    return {"name": name, "parameters": parameters, "outputs": outputs}


@pytest.fixture(scope="session")
def default_stack(aws, packaged):
    """template.yaml with every parameter at its default."""
    return _stack(aws, packaged, "sfn-lock", {})


@pytest.fixture(scope="session")
def s3_stack(aws, packaged):
    """The LockStore=s3 variant."""
    return _stack(aws, packaged, "sfn-lock-s3", {"LockStore": "s3"})


@pytest.fixture(scope="session")
def user_resources(aws):
    """What a user brings to the attach variant: a state machine of their own
    (with its role) and an SNS topic for the alarms."""
    return background.user_resources(aws)


@pytest.fixture(scope="session")
def attach_stack(aws, packaged, user_resources):
    """TargetStateMachineArn: the user's state machine run under the lock by
    the attach variant; AlarmTopicArn: the alarms notify the user's topic."""
    return _stack(aws, packaged, "sfn-lock-attach",
                  {"TargetStateMachineArn": user_resources["target"],
                   "AlarmTopicArn": user_resources["topic"]})


@pytest.fixture(scope="session")
def swept(aws, packaged):
    """The cleanup chain at its shortest (CleanupDelaySeconds and
    WorkloadMaxRunSeconds at their minimums), with a wrapped state machine of
    the user's own in LockedStateMachineArns; an execution of each holding
    its lock, stopped, and a watch for the sweep freeing each (background.py)."""
    def deploy_stack(parameters):
        return _stack(aws, packaged, "sfn-lock-sweep", parameters)

    with timed("start: two holders stopped, the sweep watched"):
        return background.stop_two_holders(deploy_stack)


@pytest.fixture(scope="session")
def scheduled(aws, packaged):
    """LockStore=ssm with a one-time ScheduleExpression, alarms and dashboard
    off; the CLI holds the schedule's lock from before the stack exists, so
    the scheduled start finds it held (background.py)."""
    def deploy_stack(parameters):
        return _stack(aws, packaged, "sfn-lock-scheduled", parameters)

    with timed("start: the CLI holds, the scheduled stack deployed"):
        started = background.schedule_behind_the_cli(deploy_stack)
    yield started
    started["holder"].stop()


@pytest.fixture(scope="session")
def no_samples(aws, packaged):
    """SampleStateMachines=false with the attach wrapper (test_no_samples.py)."""
    import test_no_samples
    return test_no_samples.start(aws, lambda p: _stack(aws, packaged, test_no_samples.STACK, p))


@pytest.fixture(scope="session", autouse=True)
def started_early(request):
    """The scenarios that wait on the emulator's clocks, started before the
    first test when a selected test uses them."""
    for name in ("swept", "scheduled", "no_samples"):
        if any(name in item.fixturenames for item in request.session.items):
            request.getfixturevalue(name)
