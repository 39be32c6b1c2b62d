"""The deployed tier's fixtures: template.yaml packaged once and deployed into
the emulator scripts/deployed-stack.sh runs (AWS_ENDPOINT_URL), once with the
default parameters and once per variant a test asks for. Each step's time is
printed at the end of the run."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import deploy  # noqa: E402

TIMES: list[tuple[str, float]] = []


def timed(name):
    class _Timer:
        def __enter__(self):
            self.start = time.monotonic()

        def __exit__(self, *exc):
            TIMES.append((name, time.monotonic() - self.start))

    return _Timer()


def pytest_configure(config):
    # https with IAM on (SFN_LOCK_DEPLOYED_AUTH, scripts/deployed-stack.sh).
    if not os.environ.get("AWS_ENDPOINT_URL", "").startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
        raise pytest.UsageError(
            "the deployed tier runs against the local emulator only: "
            "run it through scripts/deployed-stack.sh (make deployed-test)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = time.monotonic()
    yield
    TIMES.append((f"scenario {item.name}", time.monotonic() - start))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_sep("-", "deployed tier: time per step")
    for name, seconds in TIMES:
        terminalreporter.write_line(f"  {name:<55} {seconds:6.1f} s")


@pytest.fixture(scope="session")
def aws():
    return boto3.Session()


@pytest.fixture(scope="session")
def packaged(aws):
    logs = Path(os.environ.get("SFN_LOCK_DEPLOYED_LOGS", deploy.ROOT / "target"))
    with timed("package (cargo lambda build, zips, uploads)"):
        return deploy.package(aws, out_dir=logs / "package")


def _stack(aws, packaged, name, parameters):
    with timed(f"deploy {name} {parameters or '(defaults)'}"):
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
def sweep_stack(aws, packaged):
    """The cleanup chain at its shortest: the queue's delay and the sweep's
    grace (WorkloadMaxRunSeconds) at their minimums, so that a stopped
    execution's lock is freed within a minute instead of fifteen."""
    return _stack(aws, packaged, "sfn-lock-sweep",
                  {"CleanupDelaySeconds": "20", "WorkloadMaxRunSeconds": "30"})
