"""The CLI's figures in `make bench`: the size of the `sfn-lock` binary, and its
cold start as a user feels it, the wall time of whole processes:

  sfn-lock --version                         process start and argument parsing,
                                             no AWS at all;
  sfn-lock status --store dynamodb://T NAME  that, plus the tokio runtime, the AWS
                                             config from the environment and one
                                             GetItem over plain HTTP to the bench's
                                             moto: once on a free lock and, for
                                             comparison, once on a held one.

Each process is timed from just before it is spawned to its exit, its output read
(Python's fork/exec and pipe reads included). The commands' order is shuffled per
round so that the machine's noise falls on all three alike. Every answer is
checked: exit status 0, and the status of the held lock must name its holder, of
the free one say "free"; a wrong answer is noted and fails the run. Speed is
reported, never asserted.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import time
from typing import Callable

from runtime_api import HarnessError

MB = 1024 * 1024
HOLDER = "arn:aws:states:us-east-1:123456789012:execution:bench:cli-holder"
# Generous: the CLI's own SDK timeouts end a hung request within 4 s per attempt.
TIMEOUT_SECONDS = 30
# Below this many runs the nearest-rank p90 is the maximum itself: (min–max) only.
P90_MIN_RUNS = 11
LABELS = {
    "version": "sfn-lock --version",
    "status_free": "sfn-lock status (free lock, local moto)",
    "status_held": "sfn-lock status (held lock, local moto)",
}


def cli_env(aws_env: dict[str, str], home: str) -> dict[str, str]:
    """A user's shell reduced to what matters, none of this one's: the standard AWS
    variables (static keys, so no credential provider goes looking further) and an
    empty HOME, so that aws-config looks for ~/.aws/config and finds nothing."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home, **aws_env}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of one whole process, in ms, and what it answered."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS)
    return (time.perf_counter() - started) * 1000, done


def wrong_answer(command: str, done: subprocess.CompletedProcess, lock: str) -> str | None:
    """Why an answer is wrong, or None if it is right."""
    if done.returncode != 0:
        return f"exit status {done.returncode}: {done.stderr.strip()[-500:]!r}"
    if command == "version" and not done.stdout.startswith("sfn-lock "):
        return f"printed {done.stdout!r}"
    if command == "status_free" and f'"{lock}": free' not in done.stdout:
        return f"printed {done.stdout!r}, expected the lock free"
    if command == "status_held" and ("held by 1" not in done.stdout or HOLDER not in done.stdout):
        return f"printed {done.stdout!r}, expected it held by {HOLDER}"
    return None


def stats(values: list[float], percentile: Callable[[list[float], float], float]) -> dict | None:
    """median, p90 (nearest rank; None below P90_MIN_RUNS), min and max."""
    if not values:
        return None
    return {"median": statistics.median(values), "p90": percentile(values, 90) if len(values) >= P90_MIN_RUNS else None,
            "min": min(values), "max": max(values), "runs": len(values)}


def measure(binary: str, profile: str, stack, table: str, run_id: str, runs: int, home: str,
            percentile: Callable[[list[float], float], float], notes: list[str]) -> dict:
    """The CLI's figures; wrong answers go to `notes` (they fail the run)."""
    if not os.access(binary, os.X_OK):
        raise HarnessError(f"no CLI binary at {binary}")
    os.makedirs(home, exist_ok=True)
    env = cli_env(stack.aws_env(stack.endpoint), home)
    store = f"dynamodb://{table}"
    free, held = f"cli-free-{run_id}", f"cli-held-{run_id}"
    stack.hold(table, [held], HOLDER)
    commands = {
        "version": ([binary, "--version"], ""),
        "status_free": ([binary, "status", "--store", store, free], free),
        "status_held": ([binary, "status", "--store", store, held], held),
    }
    # One untimed run of each first: the binary is in the page cache then, as for a
    # user who runs it again (a first run after boot also reads it from disk).
    for name, (argv, lock) in commands.items():
        _, done = timed(argv, env)
        if (why := wrong_answer(name, done, lock)) is not None:
            notes.append(f"CLI {LABELS[name]} (warm-up run): {why}")
    times: dict[str, list[float]] = {name: [] for name in commands}
    rng = random.Random(3)
    order = list(commands)
    started = time.monotonic()
    for _ in range(runs):
        rng.shuffle(order)
        for name in order:
            argv, lock = commands[name]
            try:
                ms, done = timed(argv, env)
            except subprocess.TimeoutExpired:
                notes.append(f"CLI {LABELS[name]}: no exit within {TIMEOUT_SECONDS} s")
                continue
            if (why := wrong_answer(name, done, lock)) is not None:
                notes.append(f"CLI {LABELS[name]}: {why}")
                continue  # a wrong answer's time is no figure
            times[name].append(ms)
    size = os.path.getsize(binary)
    return {
        "binary": binary, "profile": profile, "size_bytes": size, "size_mib": size / MB, "store_url": store,
        "runs": runs, "env": sorted(env),
        "wall_ms": {name: stats(values, percentile) for name, values in times.items()},
        "raw_wall_ms": times,
        "commands": {name: argv for name, (argv, _) in commands.items()},
        "elapsed_seconds": round(time.monotonic() - started, 1),
    }


def wall_text(stat: dict | None) -> str:
    """`4.12 ms (p90 5.01; 3.80–6.20)`; with fewer than P90_MIN_RUNS runs only (min–max)."""
    if stat is None:
        return "— (no right answer)"
    if stat["runs"] == 1:
        return f"{stat['median']:.2f} ms"
    spread = f"{stat['min']:.2f}–{stat['max']:.2f}"
    if stat["p90"] is None:
        return f"{stat['median']:.2f} ms ({spread})"
    return f"{stat['median']:.2f} ms (p90 {stat['p90']:.2f}; {spread})"


def table_rows(figures: dict | None) -> list[tuple[str, str]]:
    """(figure, value) rows for bench.py's table."""
    if not figures:
        return []
    kind = "stripped" if figures["profile"] == "release" else f"{figures['profile']} profile, not stripped"
    rows = [(f"CLI binary size (x86_64, {kind}): sfn-lock",
             f"{figures['size_mib']:.2f} MiB ({figures['size_bytes']:,} bytes)")]
    for name, stat in figures["wall_ms"].items():
        rows.append((f"CLI wall time, {figures['runs']} run(s): {LABELS[name]}", wall_text(stat)))
    return rows
