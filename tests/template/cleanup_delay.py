"""The cleanup's delay must outlast every acquire that was in flight.

release-execution-locks sweeps an ended execution's locks CleanupDelaySeconds
after the end event (the queue's DelaySeconds). That closes the late-acquire
race only if the smallest allowed delay exceeds the acquire function's timeout:
an acquire still running when the execution ended has then landed before the
sweep looks (DESIGN.md, "Ends without a release").

Usage: cleanup_delay.py template.yaml | cleanup_delay.py --self-test
"""

from __future__ import annotations

import sys
from pathlib import Path

from cfn_template import load


def problems(template: dict) -> list[str]:
    found = []
    delay = template.get("Parameters", {}).get("CleanupDelaySeconds", {})
    resources = template.get("Resources", {})
    acquire = resources.get("AcquireLockFunction", {}).get("Properties", {})
    queue_delay = (
        resources.get("CleanupQueue", {}).get("Properties", {}).get("DelaySeconds")
    )
    minimum, timeout = delay.get("MinValue"), acquire.get("Timeout")
    if minimum is None or timeout is None:
        return ["CleanupDelaySeconds.MinValue or AcquireLockFunction.Timeout is missing"]
    if int(minimum) <= int(timeout):
        found.append(
            f"CleanupDelaySeconds may be {minimum} s, not longer than the acquire function's {timeout} s timeout"
        )
    if queue_delay != {"Ref": "CleanupDelaySeconds"}:
        found.append(f"the cleanup queue's DelaySeconds is {queue_delay!r}, not CleanupDelaySeconds")
    return found


def self_test() -> int:
    good = {
        "Parameters": {"CleanupDelaySeconds": {"MinValue": 15}},
        "Resources": {
            "AcquireLockFunction": {"Properties": {"Timeout": 10}},
            "CleanupQueue": {"Properties": {"DelaySeconds": {"Ref": "CleanupDelaySeconds"}}},
        },
    }
    short = {**good, "Parameters": {"CleanupDelaySeconds": {"MinValue": 10}}}
    undelayed = {
        **good,
        "Resources": {**good["Resources"], "CleanupQueue": {"Properties": {}}},
    }
    results = [not problems(good), bool(problems(short)), bool(problems(undelayed))]
    print(f"cleanup delay self-test: {sum(results)} of {len(results)} as expected")
    return 0 if all(results) else 1


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(load(Path(sys.argv[1])))
    for problem in found:
        print(f"cleanup delay: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
