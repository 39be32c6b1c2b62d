"""The per-store table of `make bench`: the same function binaries with the locks
in DynamoDB, S3 and SSM (LOCK_STORE_URL), side by side.

For each store:
  requests per operation   each scenario's requests, counted at the wire by
      counting_proxy.py (the functions' AWS_ENDPOINT_URL_DYNAMODB, _S3, _SSM and
      _SFN name the proxy), by operation and in the order first sent, next to
      STORE_REQUESTS, the counts recorded from the design; proxy_check.py first
      checks that the proxy passes S3's writes on unchanged;
  cold start, init CPU     spawn to the first GET /next of a process started
      with that store's LOCK_STORE_URL (the client it builds differs), and the
      CPU it used by then;
  warm acquire / release   p50 and p99 over `cycles` acquire (a fresh name) +
      release cycles in one warm acquire-lock and one warm release-lock process
      per store, straight to moto (no proxy), the stores' order shuffled per
      cycle so that the machine's noise falls on all three alike; and the
      processes' CPU time per invoke.

Every answer is checked (granted, renewed, LockUnavailable, released, not_held,
one lock swept): a wrong one is noted and fails the run. So does, on S3 and SSM,
a grant or renewal that wrote no owner marker, or a release that answered
`released` and deleted none (the sweep finds a lock only by its marker), and a
count that differs from STORE_REQUESTS (shown "differs" and listed): change
STORE_REQUESTS only with the design (DESIGN.md's request tables).
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from types import SimpleNamespace

import proxy_check
from runtime_api import FunctionProcess

STORES = ("dynamodb", "s3", "ssm")
LABELS = {"dynamodb": "DynamoDB", "s3": "S3", "ssm": "SSM"}
BUCKET = "sfn-lock-bench"
SEMAPHORE_LIMIT = 3

# What each scenario sends, by operation, on each store: the design's count as
# the code had it when recorded (dynamodb*.rs, document_store.rs, s3.rs, ssm.rs,
# ssm_calls.rs; DESIGN.md). Update it with the design (a difference fails the run).
#
# S3 and SSM keep a lock as one document: every call reads it, decides
# (document.rs) and writes it back conditionally.
#   S3   read: GetObject. write: PutObject with If-None-Match: * (a new lock) or
#        If-Match: <ETag>. Reads are strongly consistent: an answer without a
#        write (contended, not_held) needs no more.
#   SSM  read: GetParameter of the `current` hint, then GetParameters probing the
#        ten generations from the hint's on; a lock without a hint (a new one)
#        lists its generations instead (GetParametersByPath). write: PutParameter
#        of the next generation with Overwrite=false (the arbiter), then the hint
#        overwritten. Reads may be stale, so a release's answer without a change
#        (not_held) is confirmed by writing the same document as the next
#        generation. (Old generations are deleted five minutes after they were
#        superseded: never within these scenarios.)
#   Both: an acquire that grants or renews first writes the owner's marker (the
#        sweep lists an ended execution's locks by it; a renewal mends a lost
#        one); a release that leaves the owner without the lock deletes it, also
#        when the lock was not held. The sweep lists the owner's markers, then
#        releases each lock.
# DynamoDB: a mutex is one item, one conditional UpdateItem a call (a renewal:
# the failed grant, then the renew), and the sweep finds an owner's locks by an
# index (Query); a semaphore writes a marker item first (bench.py, SEMAPHORE_REQUESTS).
_S3_READ = {"GetObject (lock)": 1}
_S3_GRANT = {**_S3_READ, "PutObject (marker)": 1, "PutObject (lock)": 1}
_S3_RELEASE = {**_S3_READ, "PutObject (lock)": 1, "DeleteObject (marker)": 1}
_SSM_READ = {"GetParameter (current)": 1, "GetParameters (generations)": 1}
_SSM_READ_NEW = {"GetParameter (current)": 1, "GetParametersByPath (generations)": 1}
_SSM_WRITE = {"PutParameter (generation)": 1, "PutParameter (current)": 1}
_SSM_GRANT = {**_SSM_READ, "PutParameter (marker)": 1, **_SSM_WRITE}
_SSM_GRANT_NEW = {**_SSM_READ_NEW, "PutParameter (marker)": 1, **_SSM_WRITE}
# A release lists the owner's markers for the lock (a grant's marker is named
# by its fencing token, DESIGN.md "SSM") and deletes them.
_SSM_RELEASE = {**_SSM_READ, **_SSM_WRITE, "GetParametersByPath (markers)": 1, "DeleteParameters (markers)": 1}
STORE_REQUESTS: dict[str, dict[str, dict[str, int]]] = {
    "uncontended acquire (fresh name)": {
        "dynamodb": {"UpdateItem": 1}, "s3": _S3_GRANT, "ssm": _SSM_GRANT_NEW},
    "renew (same owner)": {
        "dynamodb": {"UpdateItem": 2}, "s3": _S3_GRANT, "ssm": _SSM_GRANT},
    "contended acquire": {
        "dynamodb": {"UpdateItem": 1}, "s3": _S3_READ, "ssm": _SSM_READ},
    "takeover of expired lock": {
        "dynamodb": {"UpdateItem": 1}, "s3": _S3_GRANT, "ssm": _SSM_GRANT},
    "release": {
        "dynamodb": {"UpdateItem": 1}, "s3": _S3_RELEASE, "ssm": _SSM_RELEASE},
    "release, not held": {
        # Nothing freed: the owner's marker stays (release-lock may run beside the
        # same owner's acquire); SSM confirms the answer with a generation, and
        # lists the owner's markers to delete those of grants that are over
        # (DESIGN.md, "Owner markers"; none here).
        "dynamodb": {"UpdateItem": 1}, "s3": _S3_READ,
        "ssm": {**_SSM_READ, **_SSM_WRITE, "GetParametersByPath (markers)": 1}},
    f"semaphore acquire (limit {SEMAPHORE_LIMIT}, fresh name)": {
        "dynamodb": {"PutItem": 1, "UpdateItem": 1}, "s3": _S3_GRANT, "ssm": _SSM_GRANT_NEW},
    f"semaphore release (limit {SEMAPHORE_LIMIT})": {
        "dynamodb": {"UpdateItem": 1, "DeleteItem": 1}, "s3": _S3_RELEASE, "ssm": _SSM_RELEASE},
    "cleanup sweep (1 held lock)": {
        # The sweep reads the lock's item before it writes (issue 22): an
        # ended execution that holds nothing there costs no write.
        "dynamodb": {"DescribeExecution": 1, "Query": 1, "GetItem": 1, "UpdateItem": 1},
        "s3": {"DescribeExecution": 1, "ListObjectsV2": 1, **_S3_RELEASE},
        "ssm": {"DescribeExecution": 1, **_SSM_RELEASE, "GetParametersByPath (markers)": 2}},
}
FUNCTIONS = ("acquire-lock", "release-lock", "release-execution-locks")
COLD_START_GOAL_MS = 15


def store_url(store: str, table: str, run_id: str) -> str:
    return {"dynamodb": f"dynamodb://{table}", "s3": f"s3://{BUCKET}/bench-{run_id}/",
            "ssm": f"ssm:///sfn-lock-bench/{run_id}"}[store]


def same_counts(counted: dict[str, int], expected: dict[str, int]) -> bool:
    return dict(counted) == dict(expected)


def ops_text(counts: dict[str, int]) -> str:
    """`GetObject (lock), PutObject (marker) ×2`, in the order first sent."""
    return ", ".join(op if n == 1 else f"{op} ×{n}" for op, n in counts.items()) or "none"


class StoreBench:
    """Runs the per-store figures with the Bench's stack, binaries and notes.

    `h` carries bench.py's helpers (function_env, acquire_event, release_event,
    sweep_event, answer, percentile, OWNER, OTHER, BENCH_STATE_MACHINE)."""

    def __init__(self, bench, h: SimpleNamespace):
        self.bench = bench
        self.h = h
        self.stack = bench.stack
        self.run_id = bench.run_id
        self.subjects = bench.variants["ours"]
        self.urls = {store: store_url(store, bench.table, self.run_id) for store in STORES}
        self.differences: list[str] = []
        s3 = self.stack.boto("s3")
        try:
            s3.create_bucket(Bucket=BUCKET)
        except (s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
            pass
        # moto loads a service's backend on its first request, which can take
        # longer than the functions' 2 s attempt timeout: load SSM's now too.
        self.stack.boto("ssm").get_parameters(Names=[f"/sfn-lock-bench/{self.run_id}/warm-up"])

    def env(self, store: str, endpoint: str) -> dict[str, str]:
        env = self.h.function_env(endpoint, self.bench.table)
        del env["LOCK_TABLE_NAME"]
        env["LOCK_STORE_URL"] = self.urls[store]
        # The functions turn on path-style addressing themselves when these are set.
        env["AWS_ENDPOINT_URL_S3"] = endpoint
        env["AWS_ENDPOINT_URL_SSM"] = endpoint
        return env

    def spawn(self, function: str, store: str, endpoint: str, tag: str) -> FunctionProcess:
        subject = self.subjects[function]
        env = {**self.env(store, endpoint), **subject.extra_env}
        return FunctionProcess(f"{function}[{store}]", subject.argv, env,
                               f"{self.bench.logs}/store-{store}-{tag}-{function}.log")

    def note(self, text: str) -> None:
        self.bench.notes.append(text)

    def outcome(self, invocation) -> str:
        kind, payload = self.h.answer(invocation)
        return payload.get("outcome", "ok") if kind == "ok" and isinstance(payload, dict) else str(payload)

    # -- requests per operation ------------------------------------------------

    def requests(self, proxy) -> dict:
        """STORE_REQUESTS' scenarios on each store, through `proxy`."""
        h = self.h
        # First, that the proxy forwards S3's writes as sent (raises if not).
        proxy_check.check(proxy.url, BUCKET, f"proxy-check-{self.run_id}/")
        proxy.take()
        results: dict[str, dict] = {}
        procs: dict[str, dict[str, FunctionProcess]] = {}
        try:
            for store in STORES:
                procs[store] = {fn: self.spawn(fn, store, proxy.url, "count") for fn in FUNCTIONS}
                for proc in procs[store].values():
                    proc.start()
            # The expired holder for the takeover: a 1 s lease, granted through the
            # function on each store before anything else (no layout written by hand).
            expired = f"store-expired-{self.run_id}"
            for store in STORES:
                got = self.outcome(procs[store]["acquire-lock"].invoke(
                    {"lockName": expired, "owner": h.OTHER, "leaseSeconds": 1}))
                if got != "granted":
                    self.note(f"{store}: setup acquire of {expired} (1 s lease) answered {got!r}, expected 'granted'")
            expires = time.monotonic() + 1.2
            for store in STORES:
                results[store] = self._count_store(store, procs[store], proxy, expired, expires)
        finally:
            for by_function in procs.values():
                for proc in by_function.values():
                    proc.stop()
        return results

    def _count_store(self, store: str, procs: dict[str, FunctionProcess], proxy, expired: str,
                     expires: float) -> dict:
        h = self.h
        acquire, release, sweep = procs["acquire-lock"], procs["release-lock"], procs["release-execution-locks"]
        lock = f"store-count-{self.run_id}"
        semaphore = f"store-sem-{self.run_id}"
        out: dict[str, dict] = {}

        def record(scenario: str, proc: FunctionProcess, event: dict, expect: str) -> None:
            proxy.take()
            invocation = proc.invoke(event)
            counts = proxy.take()
            got = self.outcome(invocation)
            if scenario.startswith("cleanup sweep"):
                kind, payload = h.answer(invocation)
                got = f"released {len(payload.get('released', []))}" if kind == "ok" else str(payload)
            recorded = STORE_REQUESTS[scenario][store]
            out[scenario] = {"requests": sum(counts.values()), "by_operation": counts, "answer": got,
                             "expected": expect, "recorded_by_operation": recorded,
                             "same_as_recorded": same_counts(counts, recorded)}
            if got != expect:
                self.note(f"{store} {scenario}: answered {got!r}, expected {expect!r}")
            elif store != "dynamodb" and got in ("granted", "renewed", "released"):
                wrote = "Put" if got != "released" else "Delete"
                if not any(op.startswith(wrote) and op.endswith(("(marker)", "(markers)")) for op in counts):
                    self.note(f"{store} {scenario}: answered {got} without {'writing' if wrote == 'Put' else 'deleting'} "
                              f"the owner's marker ({ops_text(counts)})")
            if not out[scenario]["same_as_recorded"]:
                difference = (f"{store} {scenario}: {sum(counts.values())} requests ({ops_text(counts)}); "
                              f"recorded {sum(recorded.values())} ({ops_text(recorded)})")
                self.differences.append(difference)
                self.note(difference)

        record("uncontended acquire (fresh name)", acquire, h.acquire_event(lock), "granted")
        record("renew (same owner)", acquire, h.acquire_event(lock), "renewed")
        record("contended acquire", acquire, h.acquire_event(lock, h.OTHER), "LockUnavailable")
        time.sleep(max(0.0, expires - time.monotonic()))
        record("takeover of expired lock", acquire, h.acquire_event(expired), "granted")
        record("release", release, h.release_event(lock), "released")
        record("release, not held", release, h.release_event(lock), "not_held")
        limit = SEMAPHORE_LIMIT
        record(f"semaphore acquire (limit {limit}, fresh name)", acquire, h.acquire_event(semaphore, h.OWNER, limit),
               "granted")
        record(f"semaphore release (limit {limit})", release, h.release_event(semaphore, h.OWNER, limit), "released")
        # The sweep: an ended execution of the swept state machine holding one lock.
        owner = f"arn:aws:states:us-east-1:123456789012:execution:bench:store-sweep-{store}-{self.run_id}"
        held = f"store-sweep-{self.run_id}"
        got = self.outcome(acquire.invoke(h.acquire_event(held, owner)))
        if got != "granted":
            self.note(f"{store}: setup acquire of {held} for the sweep answered {got!r}, expected 'granted'")
        self.stack.end_executions([owner])
        record("cleanup sweep (1 held lock)", sweep, h.sweep_event(owner), "released 1")
        return out

    # -- cold starts -------------------------------------------------------------

    def cold_starts(self, runs: int, rng: random.Random) -> dict:
        """`runs` cold starts of each function per store, the order shuffled per round."""
        raw: dict[str, dict[str, list[dict]]] = {store: {fn: [] for fn in FUNCTIONS} for store in STORES}
        plan = [(store, fn) for store in STORES for fn in FUNCTIONS]
        for r in range(runs):
            rng.shuffle(plan)
            for store, fn in plan:
                proc = self.spawn(fn, store, self.stack.endpoint, "cold")
                try:
                    cold = proc.start()
                    init_cpu = proc.cpu_ns() / 1e6
                finally:
                    proc.stop()
                raw[store][fn].append({"cold_start_ms": cold, "init_cpu_ms": init_cpu})
        return raw

    # -- warm latency ------------------------------------------------------------

    def warm(self, cycles: int, warm_up: int, rng: random.Random) -> dict:
        """Acquire (fresh name) + release cycles, one warm process per function and store."""
        h = self.h
        procs: dict[str, dict[str, FunctionProcess]] = {}
        latencies = {store: {"acquire": [], "release": []} for store in STORES}
        cpu_before: dict[tuple[str, str], int] = {}
        try:
            for store in STORES:
                procs[store] = {fn: self.spawn(fn, store, self.stack.endpoint, "warm")
                                for fn in ("acquire-lock", "release-lock")}
                for proc in procs[store].values():
                    proc.start()
            order = list(STORES)
            for i in range(warm_up + cycles):
                if i == warm_up:
                    cpu_before = {(s, fn): p.cpu_ns() for s in STORES for fn, p in procs[s].items()}
                rng.shuffle(order)
                for store in order:
                    name = f"store-warm-{store}-{self.run_id}-{i}"
                    for op, fn, event, expect in (("acquire", "acquire-lock", h.acquire_event(name), "granted"),
                                                  ("release", "release-lock", h.release_event(name), "released")):
                        invocation = procs[store][fn].invoke(event)
                        got = self.outcome(invocation)
                        if got != expect:
                            self.note(f"{store} warm {op} {i}: answered {got!r}, expected {expect!r}")
                        if i >= warm_up:
                            latencies[store][op].append(invocation.latency_ms)
            out = {}
            for store in STORES:
                cpu = {op: (procs[store][fn].cpu_ns() - cpu_before[(store, fn)]) / 1e6 / cycles
                       for op, fn in (("acquire", "acquire-lock"), ("release", "release-lock"))}
                out[store] = {
                    op: {"p50_ms": h.percentile(values, 50), "p99_ms": h.percentile(values, 99),
                         "mean_ms": statistics.fmean(values), "cpu_ms_per_invoke": cpu[op], "invokes": len(values)}
                    for op, values in latencies[store].items()
                }
                out[store]["peak_rss_kib"] = {fn: p.peak_rss_kib() for fn, p in procs[store].items()}
            out["latencies_ms"] = latencies
            return out
        finally:
            for by_function in procs.values():
                for proc in by_function.values():
                    proc.stop()

    # -- the whole per-store part ------------------------------------------------

    def run(self, proxy, cold_runs: int, cycles: int, warm_up: int) -> dict:
        rng = random.Random(2)
        started = time.monotonic()
        requests = self.requests(proxy)
        cold = self.cold_starts(cold_runs, rng)
        warm = self.warm(cycles, warm_up, rng)
        return {"urls": self.urls, "requests": requests, "differences_from_recorded": self.differences,
                "cold_raw": cold, "warm": warm,
                "settings": {"cold_runs": cold_runs, "cycles": cycles, "warm_up": warm_up},
                "elapsed_seconds": round(time.monotonic() - started, 1)}


def summarize(figures: dict, summary) -> dict:
    """Cold-start medians (min–max) per store and function, for the JSON and the table."""
    return {store: {fn: {"cold_start_ms": summary([x["cold_start_ms"] for x in runs]),
                         "init_cpu_ms": summary([x["init_cpu_ms"] for x in runs])}
                    for fn, runs in by_fn.items()}
            for store, by_fn in figures["cold_raw"].items()}


def render(figures: dict | None, fmt, smoke: bool) -> tuple[str | None, list[dict]]:
    """Two tables, one block: timings per store, then each scenario's requests."""
    if not figures:
        return None, []
    cold, warm, requests = figures["cold"], figures["warm"], figures["requests"]
    rows: list[dict] = []

    def met_text(flag: bool | None) -> str:
        if flag is None:
            return ""
        return "n/a (smoke)" if smoke else ("yes" if flag else "NO")

    def add(figure, cells, goal="", met=None):
        rows.append({"figure": figure, **{s: cells[s] for s in STORES}, "goal": goal, "met": met_text(met)})

    for fn in FUNCTIONS:
        stats = {s: cold[s][fn]["cold_start_ms"] for s in STORES}
        add(f"cold start: {fn}", {s: fmt(stats[s]) for s in STORES}, f"≤ {COLD_START_GOAL_MS} ms",
            all(stats[s] and stats[s]["median"] <= COLD_START_GOAL_MS for s in STORES))
    for fn in ("acquire-lock", "release-lock"):
        add(f"init CPU time: {fn}", {s: fmt(cold[s][fn]["init_cpu_ms"]) for s in STORES})
    for op in ("acquire", "release"):
        add(f"warm {op} p50 / p99", {s: f"{warm[s][op]['p50_ms']:.2f} / {warm[s][op]['p99_ms']:.2f} ms" for s in STORES})
    for op in ("acquire", "release"):
        add(f"CPU time per warm {op}", {s: f"{warm[s][op]['cpu_ms_per_invoke']:.3f} ms" for s in STORES})
    add("peak RSS: acquire-lock / release-lock",
        {s: " / ".join(f"{warm[s]['peak_rss_kib'][fn] / 1024:.1f}" for fn in ("acquire-lock", "release-lock")) + " MiB"
         for s in STORES})
    cycle = {s: requests[s]["uncontended acquire (fresh name)"]["requests"] + requests[s]["release"]["requests"]
             for s in STORES}
    add("requests per acquire (fresh name) + release", {s: str(cycle[s]) for s in STORES})

    settings = figures["settings"]
    title = (f"per store (LOCK_STORE_URL {', '.join(figures['urls'][s] for s in STORES)}; moto; "
             f"cold starts: median of {settings['cold_runs']}; warm: {settings['cycles']} acquire + release cycles "
             f"after {settings['warm_up']} warm-up, one process per function and store, stores shuffled per cycle)")
    headers = ["figure", *(LABELS[s] for s in STORES), "goal", "met?"]
    keys = ["figure", *STORES, "goal", "met"]
    lines = [title, *_markdown(headers, keys, rows)]

    request_rows = []
    for scenario in STORE_REQUESTS:
        for s in STORES:
            r = requests[s].get(scenario)
            if r is None:
                continue
            answer = "" if r["answer"] == r["expected"] else f" (answers {r['answer']}!)"
            recorded = r["recorded_by_operation"]
            request_rows.append({"scenario": scenario, "store": LABELS[s], "requests": f"{r['requests']}{answer}",
                                 "ops": ops_text(r["by_operation"]),
                                 "recorded": str(sum(recorded.values())) if r["same_as_recorded"]
                                 else f"{sum(recorded.values())}: differs",
                                 })
    lines.append("")
    lines.append("requests per operation, counted at the wire (counting_proxy.py), in the order first sent; "
                 "recorded: the design's count (stores.py, STORE_REQUESTS), compared operation by operation")
    lines += _markdown(["scenario", "store", "requests", "by operation", "recorded"],
                       ["scenario", "store", "requests", "ops", "recorded"], request_rows)
    return "\n".join(lines), rows + request_rows


def _markdown(headers: list[str], keys: list[str], rows: list[dict]) -> list[str]:
    widths = [max(len(headers[i]), *(len(str(r[k])) for r in rows)) for i, k in enumerate(keys)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]).ljust(w) for k, w in zip(keys, widths)) + " |")
    return lines
