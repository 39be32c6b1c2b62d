// The fair queue end to end (issue 11): statemachine/queued-workflow.asl.json in the
// interpreter, its Acquire Lock a callback task (lambda:invoke.waitForTaskToken; the
// harness's waitForToken mints the token) served by the real acquire-lock, which grants
// and completes the token at once or queues the execution; the real release-lock hands the
// permit to the oldest live waiter and completes that waiter's token at the local Step
// Functions endpoint (tests/support/sfn_endpoint.py), which records every call.
//
// Each scenario holds the first holder's workload on a gate until the others have
// queued, so the queue is built before anything is handed off; nothing sleeps to let a
// race settle. The order asserted is the queue's own (the `position` each queued answer
// names, and the fencing token of each grant), never a measured duration. The workloads
// take 20 ms each, so that two of them running at once would overlap in time.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  closeClients,
  endpointCalls,
  injectFault,
  pauseStore,
  queuedWorkflowFor,
  readLock,
  stackEnv,
  startExecution,
  storeDrained,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(5));
after(closeClients);

function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A 20 ms workload that first waits for `until` (when given), counting who is inside. */
function workload(inside, until) {
  return async (payload) => {
    inside.now += 1;
    inside.max = Math.max(inside.max, inside.now);
    try {
      await until?.(payload);
      await sleep(20);
      return payload;
    } finally {
      inside.now -= 1;
    }
  };
}

/** Starts one execution and waits for its acquire-lock answer (granted or queued). */
async function startAndAnswer(definition, n, options) {
  const run = startExecution(definition, { n }, { scenario: `queue-${n}`, ...options });
  await run.record.waitFor((record) => record.acquireAttempts.length > 0, 'the acquire answer');
  const [attempt] = run.record.acquireAttempts;
  assert.equal(attempt.error, undefined, `acquire-lock failed: ${attempt.error}: ${attempt.cause}`);
  return Object.assign(run, { answer: attempt.result });
}

/** The callback task's token and what it ended as. */
const callbackOf = (run) => run.record.callbacks[0];

/** The runs in the order the lock admitted them: by the fencing token of their grant. */
const byGrant = (runs) => [...runs].sort((a, b) => callbackOf(a).output.fencingToken - callbackOf(b).output.fencingToken);

/** The endpoint's calls on one run's token, by result. */
async function callResults(run) {
  const calls = await endpointCalls();
  return calls.filter((call) => call.taskToken === callbackOf(run).taskToken).map((call) => call.result);
}

/**
 * Every run succeeded, invoked acquire-lock once (no polling) and was woken once with its
 * own grant; unless `shared` (a semaphore), no two workloads overlapped.
 */
async function assertAllRanOnce(runs, { shared = false } = {}) {
  for (const run of runs) {
    const outcome = await run.outcome;
    assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.equal(run.record.acquireAttempts.length, 1, `${run.name}: acquire-lock invoked more than once`);
    assert.equal(run.record.callbacks.length, 1, `${run.name}: more than one callback attempt`);
    assert.equal(callbackOf(run).status, 'SUCCEEDED');
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock', 'Run Workload Under Lock', 'Run Workload', 'Check Whether Workload Failed', 'Release Lock']);
    const retried = run.record.events.filter((event) => event.type === 'StateRetried' && event.state.name === 'Acquire Lock');
    assert.equal(retried.length, 0, `${run.name} retried Acquire Lock`);
    const grant = callbackOf(run).output;
    assert.equal(grant.owner, run.executionArn);
    assert.equal(grant.outcome, 'granted');
    assert.equal(run.record.workloadCalls[0].fencingToken, grant.fencingToken, 'the workload ran under its own grant');
  }
  if (shared) return;
  const intervals = runs.map((run) => run.record.workloadCalls[0]).sort((a, b) => a.enteredAt - b.enteredAt);
  for (let i = 1; i < intervals.length; i += 1) {
    assert.ok(intervals[i - 1].exitedAt <= intervals[i].enteredAt, `workloads ${i - 1} and ${i} overlapped`);
  }
}

/** Holder first, then the queued runs by the position their acquire answered. */
function queueOrder(holders, waiters) {
  for (const run of holders) assert.equal(run.answer.outcome, 'granted', JSON.stringify(run.answer));
  for (const run of waiters) assert.equal(run.answer.outcome, 'queued', JSON.stringify(run.answer));
  const positions = waiters.map((run) => run.answer.position).sort((a, b) => a - b);
  assert.deepEqual(positions, waiters.map((_, i) => i + 1), 'one position each, 1 = next');
  return [...holders, ...[...waiters].sort((a, b) => a.answer.position - b.answer.position)];
}

test('the local Step Functions endpoint answers as Step Functions does (checked with boto3)', () => {
  const python = fileURLToPath(new URL('../../.venv/bin/python', import.meta.url));
  const script = fileURLToPath(new URL('../support/check_sfn_endpoint.py', import.meta.url));
  const { sfnEndpoint } = stackEnv();
  assert.ok(sfnEndpoint, 'SFN_LOCK_SFN_ENDPOINT is unset: run under scripts/local-stack.sh');
  const checked = spawnSync(python, [script, sfnEndpoint], { encoding: 'utf8' });
  assert.equal(checked.status, 0, `${checked.stdout}${checked.stderr}`);
});

test('five executions on one lock run one at a time, in queue order, each invoking acquire-lock once', async () => {
  const lockName = uniqueLockName('queue-fifo');
  const definition = queuedWorkflowFor(lockName);
  const inside = { now: 0, max: 0 };
  const allQueued = gate();
  const runs = await Promise.all(
    [0, 1, 2, 3, 4].map((n) => startAndAnswer(definition, n, { workload: workload(inside, () => allQueued.opened) })),
  );
  const order = queueOrder(runs.filter((run) => run.answer.outcome === 'granted'), runs.filter((run) => run.answer.outcome === 'queued'));
  allQueued.open();

  await assertAllRanOnce(runs);
  assert.equal(inside.max, 1);
  assert.deepEqual(byGrant(runs).map((run) => run.name), order.map((run) => run.name), 'granted in queue order');
  const entered = [...runs].sort((a, b) => a.record.workloadCalls[0].enteredAt - b.record.workloadCalls[0].enteredAt);
  assert.deepEqual(entered.map((run) => run.name), order.map((run) => run.name), 'ran in queue order');
  for (const [i, run] of order.entries()) {
    assert.deepEqual(await callResults(run), ['ok'], `${run.name}: one SendTaskSuccess`);
    // Each waiter is woken by its predecessor's release, which names it when it says.
    const { handedTo } = run.record.releases[0].result;
    if (handedTo !== undefined) assert.equal(handedTo, order[i + 1]?.executionArn);
  }
  assert.equal((await readLock(lockName)).held, false);
});

test('LockLimit 2: two run at once, the other three are admitted in queue order as permits free', async () => {
  const lockName = uniqueLockName('queue-limit');
  const definition = queuedWorkflowFor(lockName, { LockLimit: 2 });
  const inside = { now: 0, max: 0 };
  const threeQueued = gate();
  const runs = await Promise.all(
    [0, 1, 2, 3, 4].map((n) => startAndAnswer(definition, n, { workload: workload(inside, () => threeQueued.opened) })),
  );
  const holders = runs.filter((run) => run.answer.outcome === 'granted');
  assert.equal(holders.length, 2);
  const order = queueOrder(holders, runs.filter((run) => run.answer.outcome === 'queued'));
  threeQueued.open();

  await assertAllRanOnce(runs, { shared: true });
  for (const run of runs) assert.equal(callbackOf(run).output.limit, 2);
  assert.equal(inside.max, 2, 'both permits used, never more');
  assert.deepEqual(byGrant(runs).slice(2).map((run) => run.name), order.slice(2).map((run) => run.name), 'waiters granted in queue order');
  assert.equal((await readLock(lockName)).held, false);
});

/**
 * A holder on a gate, then two waiters queued behind it (positions 1 and 2), started one
 * by one; `holderOptions` go to the holder's execution only.
 */
async function holderAndTwoWaiters(definitions, holderOptions = {}) {
  const inside = { now: 0, max: 0 };
  const release = gate();
  const holder = await startAndAnswer(definitions[0], 0, { workload: workload(inside, () => release.opened), ...holderOptions });
  const first = await startAndAnswer(definitions[1], 1, { workload: workload(inside) });
  const second = await startAndAnswer(definitions[2], 2, { workload: workload(inside) });
  queueOrder([holder], [first, second]);
  assert.deepEqual([first.answer.position, second.answer.position], [1, 2], 'queued in the order they came');
  return { holder, first, second, inside, release };
}

test('a waiter stopped while queued is skipped: the next one runs', async () => {
  const lockName = uniqueLockName('queue-stopped');
  const definition = queuedWorkflowFor(lockName);
  const { holder, first, second, inside, release } = await holderAndTwoWaiters([definition, definition, definition]);
  await first.abort();
  assert.equal((await first.outcome).status, 'ABORTED');
  release.open();

  await assertAllRanOnce([holder, second]);
  assert.equal(first.record.workloadCalls.length, 0, 'the stopped waiter ran nothing');
  assert.ok(!(await callResults(first)).includes('ok'), 'no hand-off completed the stopped waiter');
  assert.equal(inside.max, 1);
  assert.equal((await readLock(lockName)).held, false);
});

test('a waiter whose wait runs out fails with LockWaitTimeout; the lock goes on to the next', async () => {
  const lockName = uniqueLockName('queue-wait-timeout');
  const patient = queuedWorkflowFor(lockName);
  const impatient = queuedWorkflowFor(lockName, { MaxWaitSeconds: 1 });
  const { holder, first, second, release } = await holderAndTwoWaiters([patient, impatient, patient]);

  const timedOut = await first.outcome;
  assert.equal(timedOut.status, 'FAILED', JSON.stringify(timedOut));
  assert.equal(timedOut.error, 'LockWaitTimeout');
  assert.equal(callbackOf(first).status, 'TIMED_OUT');
  assert.ok(first.record.enteredStates.includes('Release Lock After Wait Timeout'));
  assert.equal(first.record.releases[0].result.released, false, 'it held nothing to release');
  // A waiter that gave up never held the lock: not held_by_other (whose alarm means a lost lease).
  assert.equal(first.record.releases[0].payload.withdraw, true);
  assert.equal(first.record.releases[0].result.outcome, 'withdrawn');
  assert.equal((await readLock(lockName)).owner, holder.executionArn, "the waiter's release left the holder's lock alone");
  release.open();

  await assertAllRanOnce([holder, second]);
  assert.equal(first.record.workloadCalls.length, 0);
  assert.ok(!(await callResults(first)).includes('ok'), 'the waiter that gave up was never handed the lock');
  assert.equal((await readLock(lockName)).held, false);
});

test('SendTaskSuccess failing once (HTTP 500) during a hand-off is retried: the waiter runs', async () => {
  // A 10 s wait, so that a waiter never woken fails in 10 s, not 45.
  const definition = queuedWorkflowFor(uniqueLockName('queue-500'), { MaxWaitSeconds: 10 });
  const { holder, first, second, release } = await holderAndTwoWaiters([definition, definition, definition]);
  await injectFault('SendTaskSuccess', 1, 500, first.executionArn);
  release.open();

  await assertAllRanOnce([holder, first, second]);
  assert.deepEqual(await callResults(first), ['fault:500', 'ok']);
  assert.deepEqual(byGrant([holder, first, second]).map((run) => run.name), [holder, first, second].map((run) => run.name));
});

test('SendTaskSuccess takes effect but its answer is lost: the woken waiter keeps the lock, no second holder', async () => {
  // A real network can lose the answer of a call that took effect: the caller sees an I/O
  // error, or, if it retries, TaskTimedOut (the token is already completed). The waiter was
  // woken and runs: the hand-off must not take it for a dead waiter and give the permit on.
  const definition = queuedWorkflowFor(uniqueLockName('queue-lost-answer'));
  const { holder, first, second, inside, release } = await holderAndTwoWaiters([definition, definition, definition]);
  await injectFault('SendTaskSuccess', 1, 'lose_answer', first.executionArn);
  release.open();

  await assertAllRanOnce([holder, first, second]);
  assert.equal(inside.max, 1);
  assert.equal((await callResults(first))[0], 'fault:lose_answer (ok)');
});

test('the lock store stops answering during a hand-off: the release is retried, every waiter runs in order', async () => {
  // Paused with SIGSTOP, as in 90-store-down: every DynamoDB caller stalls, so nothing
  // else may run meanwhile (the suite runs one file at a time, this file one test at a time).
  const definition = queuedWorkflowFor(uniqueLockName('queue-store-down'), { MaxWaitSeconds: 20 });
  let resume = () => {};
  try {
    const { holder, first, second, release } = await holderAndTwoWaiters([definition, definition, definition], {
      // The holder's first release only: its retry, and the waiters, find the store back.
      beforeRelease: async (state, attempt) => {
        if (state === 'Release Lock' && attempt === 1) resume = pauseStore();
      },
    });
    release.open();
    await holder.record.waitFor((record) => record.releases.some((entry) => entry.error), 'the release to fail on the paused store');
    resume();
    await storeDrained();

    await assertAllRanOnce([holder, first, second]);
    assert.deepEqual(byGrant([holder, first, second]).map((run) => run.name), [holder, first, second].map((run) => run.name));
  } finally {
    resume();
  }
});
