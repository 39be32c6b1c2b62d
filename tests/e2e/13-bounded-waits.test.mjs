// Timings hold by construction (issue 21): the definitions have no execution
// TimeoutSeconds; the wait is bounded by MaxWaitSeconds, the workload Task by
// WorkloadTimeoutSeconds. So a wait that runs out ends in LockWaitTimeout (the execution
// FAILED, never TIMED_OUT), and an execution admitted at the last moment of its wait still
// gets its workload's whole WorkloadTimeoutSeconds.
//
// The numbers are the template's defaults (MaxWaitSeconds 3600, WorkloadTimeoutSeconds
// 300, WorkloadMaxRunSeconds 900, LeaseMarginSeconds 300) divided by 900, rounded up:
// 4, 1, 1, 1. Before issue 21 the definitions also had TimeoutSeconds =
// ExecutionTimeoutSeconds, by default equal to MaxWaitSeconds: a wait that ran out raced
// the execution's own timeout (TIMED_OUT, no Catch), and a late admission had no time
// left for its workload; these tests fail on those definitions. Each scenario holds its
// lock from outside (acquireAs); the late admission releases it half a second before the
// wait's bound, and its workload runs 200 ms less than its Task's TimeoutSeconds. The
// scenarios run side by side, each on its own lock: about five seconds in all.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  acquireAs,
  closeClients,
  lockedWorkflowFor,
  queuedWorkflowFor,
  readLock,
  releaseAs,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(4));
after(closeClients);

/** The template's default proportions, scaled down (defaults / 900, rounded up). */
const SCALED = Object.freeze({ MaxWaitSeconds: 4, WorkloadTimeoutSeconds: 1, WorkloadMaxRunSeconds: 1, LeaseMarginSeconds: 1 });
/** The outside holder lets go this long before the wait's bound (StartTime + MaxWaitSeconds). */
const RELEASE_BEFORE_BOUND_MS = 500;
/** The late admission's workload runs this much less than WorkloadTimeoutSeconds. */
const WORKLOAD_SLACK_MS = 200;

const FLAVOURS = {
  polling: { definitionFor: lockedWorkflowFor },
  queued: { definitionFor: queuedWorkflowFor },
};

const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

/** Waits for the execution's first acquire answer (refused, or queued) and gives its wait's bound (epoch ms). */
async function waitBound(started) {
  await started.record.waitFor((record) => record.acquireAttempts.length > 0, 'the first acquire answer');
  const [first] = started.record.acquireAttempts;
  assert.ok(first.error === 'LockUnavailable' || first.result?.outcome === 'queued', JSON.stringify(first));
  return Date.parse(first.payload.waitStartedAt) + first.payload.maxWaitSeconds * 1000;
}

describe('bounded waits, the default proportions scaled down', { concurrency: true }, () => {
  for (const [flavour, { definitionFor }] of Object.entries(FLAVOURS)) {
    test(`${flavour}: a wait that runs out ends in LockWaitTimeout (FAILED, not TIMED_OUT); the holder keeps its lock`, async () => {
      const lockName = uniqueLockName(`wait-runs-out-${flavour}`);
      const holder = otherOwner(`wait-runs-out-${flavour}`);
      const held = await acquireAs(holder, lockName);
      try {
        const started = startExecution(definitionFor(lockName, SCALED), { job: 'waits' }, {
          scenario: `wait-runs-out-${flavour}`,
          retryIntervalOverrides: { 'Acquire Lock': [100, 20] },
        });
        const outcome = await started.outcome;
        assert.equal(outcome.status, 'FAILED', JSON.stringify(outcome));
        assert.equal(outcome.error, 'LockWaitTimeout');
        assert.equal(started.record.workloadCalls.length, 0);
        const lock = await readLock(lockName);
        assert.equal(lock.owner, holder);
        assert.equal(lock.fencingToken, held.fencingToken);
      } finally {
        await releaseAs(holder, lockName);
      }
    });

    test(`${flavour}: admitted at the last moment of its wait, the workload still gets its whole WorkloadTimeoutSeconds`, async () => {
      const lockName = uniqueLockName(`late-admission-${flavour}`);
      const holder = otherOwner(`late-admission-${flavour}`);
      await acquireAs(holder, lockName);
      const workMs = SCALED.WorkloadTimeoutSeconds * 1000 - WORKLOAD_SLACK_MS;
      const started = startExecution(definitionFor(lockName, SCALED), { job: 'late' }, {
        scenario: `late-admission-${flavour}`,
        retryIntervalOverrides: { 'Acquire Lock': [20, 20] },
        workload: async (payload) => {
          // The work itself: just under the Task's TimeoutSeconds.
          await sleep(workMs);
          return { done: payload.job };
        },
      });
      const bound = await waitBound(started);
      // The other owner lets go just before the bound (scenario setup, not an assertion).
      await sleep(Math.max(0, bound - RELEASE_BEFORE_BOUND_MS - Date.now()));
      assert.equal((await releaseAs(holder, lockName)).outcome, 'released');

      const outcome = await started.outcome;
      assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
      assert.deepEqual(outcome.output, { done: 'late' });
      // It was admitted late: by the lock's own clock (the lease runs from the grant or the
      // hand-off; a handed grant's acquiredAt is its request's), in the last second of the wait.
      const { expiresAt, leaseSeconds } = started.record.lease;
      const admittedAt = Date.parse(expiresAt) - leaseSeconds * 1000;
      assert.ok(admittedAt >= bound - 1000, `admitted ${bound - admittedAt} ms before the bound, not at its last moment`);
      const [call] = started.record.workloadCalls;
      assert.notEqual(call.exitedAt, undefined, 'the workload ran to its end');
      assert.equal(started.record.releases.at(-1).state, 'Release Lock');
      assert.equal((await readLock(lockName)).held, false);
    });
  }
});
