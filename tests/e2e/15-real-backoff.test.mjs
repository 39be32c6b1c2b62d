// The lock wait with its real pauses. Every other e2e scenario replaces retry pauses with
// milliseconds (harness.mjs FAST_RETRIES), so Acquire Lock's LockUnavailable retrier never
// pauses as the definition says. Here one execution of locked-workflow.asl.json holds the
// lock for a few seconds of work, a second one started just after waits through that
// retrier with no override (REAL_PAUSE; the other retriers keep their fast pauses), and
// the number of times it was refused is checked against bounds computed from the
// retrier's parameters, read from the same definition the interpreter runs, and the hold
// time observed in both executions' event logs. It asserts counts, never how long
// anything took.
//
// What aws-local-stepfunctions 3.0.0 does with Retry (StateExecutor.shouldRetry in
// node_modules/aws-local-stepfunctions/build/main.node.esm.js): before the (k+1)-th retry
// by a retrier it sleeps IntervalSeconds (default 1) x BackoffRate (default 2) ^ k,
// clamped to MaxDelaySeconds when that is present and non-zero (absent: no cap), then with
// JitterStrategy FULL a whole number of milliseconds drawn uniformly from [0, that]
// (Math.random), with NONE (the default) exactly that. k counts this retrier's retries
// since the state was entered (a new StateExecutor per entry); MaxAttempts defaults to 3.
// That is Step Functions' documented behaviour, so BackoffRate, MaxDelaySeconds and
// JitterStrategy all run here. An override replaces the interval, skips the jitter and is
// still clamped to MaxDelaySeconds; -1 leaves the retrier alone.
//
// What this scenario can and cannot catch. The retrier's pause caps are
// min(1 x 2^k, 10) s = 1, 2, 4, 8, 10, 10, ... s: MaxDelaySeconds first binds on the fifth
// retry, and the fewest refusals that could cover a hold (the lower bound below) differs
// with and without it only for holds over 1+2+4+8+10 = 25 s. A run that stays within
// about 20 s cannot tell a capped wait from an uncapped one by counting, so deleting
// MaxDelaySeconds is left to tests/template/retry_bounds.py (the wait's worst case,
// computed statically). What fails here: the wait's pauses being replaced or shortened
// (too many refusals for the hold: the fast 20 ms pauses gave 147 against a bound of 10),
// pauses longer than the retrier's caps (too few refusals for the hold: fixed 3 s pauses
// gave 2 against at least 3), the waiter's workload starting before the holder let go,
// or either execution not succeeding.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  FAST_RETRIES,
  REAL_PAUSE,
  closeClients,
  lockedWorkflowFor,
  readLock,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

// Two executions call the lock functions close together: two warm instances of each.
before(() => warmUp(2));
after(closeClients);

/**
 * The holder's simulated work, which is how long it holds the lock: long enough for the
 * waiter to be refused several times (caps 1, 2, 4 s: typically 3 to 5 refusals), short
 * enough that the scenario ends within about 6 s plus one capped pause (at most 10 s).
 */
const HOLD_MS = 6000;

/** A false failure of the upper bound may happen this rarely (the pauses are random). */
const UPPER_BOUND_FALSE_FAILURE = 1e-6;

/**
 * Per pause: whole-millisecond pauses and Date.now()'s resolution in the event log. Only
 * loosens the bounds.
 */
const ROUNDING_MS = 5;

/**
 * Per pause, for the lower bound only: how late a timer may fire on a loaded machine
 * (Node's setTimeout fires no earlier than asked, sometimes later). Only loosens it.
 * Generous (1 s, where a few ms is usual) so a busy 2-core CI machine cannot fail it:
 * with a 6 s hold the bound stays at 3 refusals, which pauses longer than the caps
 * (fixed 3 s pauses give 2) still fail.
 */
const TIMER_LATENESS_MS = 1000;

/** Acquire Lock's LockUnavailable retrier as the definition has it, with ASL's defaults. */
function lockWaitRetrier(definition) {
  const retry = definition.States['Acquire Lock'].Retry ?? [];
  const index = retry.findIndex((retrier) => retrier.ErrorEquals.includes('LockUnavailable'));
  assert.notEqual(index, -1, 'Acquire Lock has a retrier on LockUnavailable');
  const retrier = retry[index];
  return {
    index,
    intervalSeconds: retrier.IntervalSeconds ?? 1,
    backoffRate: retrier.BackoffRate ?? 2,
    maxDelaySeconds: retrier.MaxDelaySeconds ?? Infinity,
    jitter: retrier.JitterStrategy ?? 'NONE',
  };
}

/** The longest pause before retry k+1 (k from 0), in milliseconds. */
function capMs(retrier, k) {
  return Math.min(retrier.intervalSeconds * retrier.backoffRate ** k, retrier.maxDelaySeconds) * 1000;
}

/**
 * The fewest refusals whose pauses can add up to `pausedMs`: each pause is at most its
 * cap (plus rounding and timer lateness).
 */
function fewestRefusals(retrier, pausedMs) {
  let n = 0;
  for (let sum = 0; sum < pausedMs; n += 1) sum += capMs(retrier, n) + ROUNDING_MS + TIMER_LATENESS_MS;
  return n;
}

/**
 * The most refusals whose pauses fit in `windowMs`: n refusals have n - 1 pauses between
 * them. With JitterStrategy NONE the pauses are the caps; with FULL, pause k is uniform on
 * [0, cap_k], and m of them add up to at most W with probability at most
 * W^m / (m! x cap_0 x ... x cap_(m-1)) (the simplex under W, over the box of the caps), so
 * m such pauses, i.e. m + 1 refusals, are allowed only while that exceeds
 * UPPER_BOUND_FALSE_FAILURE.
 */
function mostRefusals(retrier, windowMs) {
  if (retrier.jitter !== 'FULL') {
    let n = 1;
    for (let sum = capMs(retrier, 0); sum <= windowMs + n * ROUNDING_MS; n += 1) sum += capMs(retrier, n);
    return n;
  }
  for (let m = 1; m < 10_000; m += 1) {
    const logProbability = m * Math.log(windowMs + m * ROUNDING_MS) - logFactorial(m) - sumLogCaps(retrier, m);
    if (logProbability <= Math.log(UPPER_BOUND_FALSE_FAILURE)) return m;
  }
  throw new Error('mostRefusals: no bound (caps of zero?)');
}

function logFactorial(m) {
  let sum = 0;
  for (let i = 2; i <= m; i += 1) sum += Math.log(i);
  return sum;
}

function sumLogCaps(retrier, m) {
  let sum = 0;
  for (let k = 0; k < m; k += 1) sum += Math.log(capMs(retrier, k));
  return sum;
}

const eventsOf = (record, type, state) =>
  record.events.filter((event) => event.type === type && event.state?.name === state);

test('contended with the real backoff: the waiter is refused as often as the retrier allows for the hold, and runs after the holder', async (t) => {
  const lockName = uniqueLockName('real-backoff');
  // The holder's workload task must outlast its work: WorkloadTimeoutSeconds above HOLD_MS.
  const definition = lockedWorkflowFor(lockName, { WorkloadTimeoutSeconds: Math.ceil(HOLD_MS / 1000) + 20 });
  const retrier = lockWaitRetrier(definition);

  let holderReleaseStartedAt;
  const holder = startExecution(definition, { job: 'hold' }, {
    scenario: 'real-backoff-holder',
    // Simulated work: the holder's hold, not a wait for anything.
    workload: async (payload) => {
      await sleep(HOLD_MS);
      return { done: payload.job };
    },
    beforeRelease: () => {
      holderReleaseStartedAt ??= performance.now();
    },
  });
  await holder.record.waitFor((record) => record.workloadCalls.length === 1, 'the holder to start its work');

  let lockDuringWaiterWork;
  const waiter = startExecution(definition, { job: 'wait' }, {
    scenario: 'real-backoff-waiter',
    workload: async (payload) => {
      lockDuringWaiterWork = await readLock(lockName);
      return { done: payload.job };
    },
    // The lock-wait retrier pauses as the definition says; the others stay fast.
    retryIntervalOverrides: {
      'Acquire Lock': FAST_RETRIES['Acquire Lock'].map((ms, index) => (index === retrier.index ? REAL_PAUSE : ms)),
    },
  });
  const [holderOutcome, waiterOutcome] = await Promise.all([holder.outcome, waiter.outcome]);

  // Both succeed, each with its own output.
  assert.equal(holderOutcome.status, 'SUCCEEDED', JSON.stringify(holderOutcome));
  assert.deepEqual(holderOutcome.output, { done: 'hold' });
  assert.equal(waiterOutcome.status, 'SUCCEEDED', JSON.stringify(waiterOutcome));
  assert.deepEqual(waiterOutcome.output, { done: 'wait' });

  // No overlap: the waiter's work began after the holder's had returned and its release
  // had started, under a new grant that the table shows as the waiter's.
  const [holderCall] = holder.record.workloadCalls;
  const [waiterCall] = waiter.record.workloadCalls;
  assert.equal(holder.record.acquireAttempts.length, 1, 'the holder found the lock free');
  assert.ok(waiterCall.enteredAt >= holderCall.exitedAt, 'the waiter worked while the holder was still working');
  assert.ok(waiterCall.enteredAt >= holderReleaseStartedAt, 'the waiter worked before the holder began to release');
  assert.ok(waiterCall.fencingToken > holderCall.fencingToken, 'a new grant, with a larger fencing token');
  assert.equal(lockDuringWaiterWork.owner, waiter.executionArn);
  assert.deepEqual(holder.record.releases.map((release) => release.result.outcome), ['released']);

  // The waiter waited through the lock-wait retrier: every attempt but the last was
  // refused naming the holder, and each refusal was retried by that retrier.
  const attempts = waiter.record.acquireAttempts;
  const refusals = attempts.length - 1;
  assert.equal(attempts.at(-1).result?.outcome, 'granted', JSON.stringify(attempts.at(-1)));
  for (const refused of attempts.slice(0, -1)) {
    assert.equal(refused.error, 'LockUnavailable');
    assert.equal(JSON.parse(JSON.parse(refused.cause).errorMessage).holder, holder.executionArn);
  }
  const retries = eventsOf(waiter.record, 'StateRetried', 'Acquire Lock');
  assert.deepEqual(
    retries.map((event) => [event.retry.retrier.ErrorEquals.includes('LockUnavailable'), event.retry.attempt]),
    Array.from({ length: refusals }, (_, k) => [true, k + 1]),
    'each refusal was retried by the LockUnavailable retrier, counting up from 1',
  );

  // The hold, from the event logs (one clock, Date.now()).
  const [waitBegan] = eventsOf(waiter.record, 'StateEntered', 'Acquire Lock').map((event) => event.timestamp);
  const [acquired] = eventsOf(waiter.record, 'StateExited', 'Acquire Lock').map((event) => event.timestamp);
  const [releaseBegan] = eventsOf(holder.record, 'StateEntered', 'Release Lock').map((event) => event.timestamp);
  const [released] = eventsOf(holder.record, 'StateExited', 'Release Lock').map((event) => event.timestamp);
  const failed = eventsOf(waiter.record, 'StateFailed', 'Acquire Lock').map((event) => event.timestamp);
  const paused = retries.reduce((sum, event, k) => sum + (event.timestamp - failed[k]), 0);
  const insideCalls = acquired - waitBegan - paused;

  // Lower bound (the caps, MaxDelaySeconds among them): from entering Acquire Lock until
  // the holder began to release, the waiter was refused; it spent that time inside its
  // acquire calls or pausing, so its pauses add up to at least the rest. Each pause is at
  // most its cap, so it needed at least this many refusals.
  const mustHavePaused = releaseBegan - waitBegan - insideCalls;
  const atLeast = fewestRefusals(retrier, mustHavePaused);
  // Upper bound (the pauses really run, jittered over the backoff): every refused attempt
  // began after the waiter entered Acquire Lock and before the holder's release answered,
  // with a whole pause between consecutive attempts.
  const window = released - waitBegan;
  const atMost = mostRefusals(retrier, window);
  t.diagnostic(
    `retrier: IntervalSeconds ${retrier.intervalSeconds}, BackoffRate ${retrier.backoffRate}, ` +
      `MaxDelaySeconds ${retrier.maxDelaySeconds}, JitterStrategy ${retrier.jitter}; held ${window} ms after the ` +
      `waiter began (${mustHavePaused} ms of it outside its calls); ${refusals} refusals, bounds [${atLeast}, ${atMost}]`,
  );
  assert.ok(atLeast >= 2, `the hold is long enough to need several refusals (${atLeast}); is the holder's work too short?`);
  assert.ok(refusals >= atLeast, `${refusals} refusals cannot cover ${mustHavePaused} ms of pauses capped as the retrier says: at least ${atLeast}`);
  assert.ok(refusals <= atMost, `${refusals} refusals in ${window} ms: the retrier's pauses allow at most ${atMost}`);
});
