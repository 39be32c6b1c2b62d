// PassLockToWorkload, end to end: with the option on, Acquire Lock's ResultSelector keeps
// {lockName, owner, fencingToken, expiresAt} and its ResultPath puts them under
// $.sfnLock beside the unchanged input; off (the default) the workload gets the
// execution input byte for byte. Also the renewal a long workload calls with its
// sfnLock (acquire-lock again as the same owner), and what it gets after another owner
// took the lock over. Real binaries, the lock table read directly.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  LOCK_RESULT_PATH,
  TEST_SUBSTITUTIONS,
  acquireAs,
  closeClients,
  expireLock,
  invokeFunction,
  loadDefinition,
  lockedWorkflowFor,
  readLock,
  runExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(warmUp);
after(closeClients);

const withLock = (lockName) => lockedWorkflowFor(lockName, { LockResultPath: LOCK_RESULT_PATH.on });
const withoutLock = (lockName) => lockedWorkflowFor(lockName, { LockResultPath: LOCK_RESULT_PATH.off });

const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

async function assertReleased(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

describe('PassLockToWorkload', () => {
  test('on: the workload gets its input plus sfnLock, and the token in it is the one in the table', async () => {
    const lockName = uniqueLockName('lock-on');
    const input = { orderId: 7, nested: { keep: [1, 2] } };
    let tableDuringWorkload;
    const run = await runExecution(withLock(lockName), input, {
      scenario: 'lock-on',
      workload: async (payload) => {
        tableDuringWorkload = await readLock(lockName);
        return { done: payload.orderId };
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { done: 7 }, "the execution's output is the workload's, without sfnLock");
    const [{ payload }] = run.record.workloadCalls;
    const { sfnLock, ...rest } = payload;
    assert.deepEqual(rest, input, 'the input is unchanged beside sfnLock');
    assert.deepEqual(Object.keys(sfnLock).sort(), ['expiresAt', 'fencingToken', 'lockName', 'owner']);
    assert.equal(sfnLock.lockName, lockName);
    assert.equal(sfnLock.owner, run.executionArn, 'owner is $$.Execution.Id');
    assert.equal(typeof sfnLock.fencingToken, 'number');
    assert.equal(sfnLock.fencingToken, tableDuringWorkload.fencingToken, 'the token the workload got is the one in the table');
    assert.equal(tableDuringWorkload.owner, run.executionArn);
    assert.equal(Date.parse(sfnLock.expiresAt), tableDuringWorkload.expiresAt, 'expiresAt (RFC 3339) is the lease end in the table');
    await assertReleased(lockName, sfnLock.fencingToken);
  });

  test('off (the default): the workload input is byte for byte the execution input', async () => {
    const lockName = uniqueLockName('lock-off');
    // Key order, nesting, a user field named sfnLock, unicode, numbers: all untouched.
    const input = { z: 1, a: [true, null, 2.5], sfnLock: 'the user\'s own field', nested: { 'ü': 'ß', b: {} } };
    const run = await runExecution(withoutLock(lockName), input, { scenario: 'lock-off' });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.equal(JSON.stringify(run.record.workloadCalls[0].payload), JSON.stringify(input));
    assert.equal(JSON.stringify(run.output), JSON.stringify(input));
    // The shipped substitutions are the default.
    assert.equal(TEST_SUBSTITUTIONS.LockResultPath, LOCK_RESULT_PATH.off);
  });

  for (const input of [[1, 2, 3], 'a string', 42]) {
    test(`on, with an input that is not an object (${JSON.stringify(input)}): the grant is released, the execution fails with States.ResultPathMatchFailure`, async () => {
      const lockName = uniqueLockName('lock-on-non-object');
      const run = await runExecution(withLock(lockName), input, { scenario: 'lock-on-non-object' });

      assert.equal(run.status, 'FAILED', JSON.stringify(run));
      assert.equal(run.error, 'States.ResultPathMatchFailure');
      assert.equal(run.record.workloadCalls.length, 0, 'the workload never ran');
      assert.equal(run.record.lease.outcome, 'granted', 'the grant had landed when ResultPath failed');
      assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
        ['Release Lock After Failure', 'released'],
      ]);
      await assertReleased(lockName, run.record.lease.fencingToken);
    });
  }

  test('on, attach variant: the child gets its input plus sfnLock with the token in the table', async () => {
    const lockName = uniqueLockName('attach-lock-on');
    const definition = loadDefinition('attach-existing.asl.json', {
      ...TEST_SUBSTITUTIONS,
      LockName: lockName,
      LockResultPath: LOCK_RESULT_PATH.on,
    });
    const child = { StartAt: 'Echo', States: { Echo: { Type: 'Pass', End: true } } };
    let tableWhenChildStarted;
    const run = await runExecution(definition, { job: 'reindex' }, {
      scenario: 'attach-lock-on',
      child: { definition: child },
      beforeRelease: async () => {
        tableWhenChildStarted ??= await readLock(lockName);
      },
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    const [{ input }] = run.record.childRuns;
    assert.equal(input.job, 'reindex');
    assert.equal(input.sfnLock.owner, run.executionArn);
    assert.equal(input.sfnLock.fencingToken, tableWhenChildStarted.fencingToken);
    assert.deepEqual(run.output, input, "the output is the child's output (here its input, echoed)");
    await assertReleased(lockName, input.sfnLock.fencingToken);
  });
});

describe('renewal by the workload', () => {
  test('same lockName and owner: outcome renewed, same fencing token, a new expiresAt', async () => {
    const lockName = uniqueLockName('renew');
    let renewal;
    let before;
    let afterRenewal;
    const run = await runExecution(withLock(lockName), { job: 'long' }, {
      scenario: 'renew',
      workload: async ({ sfnLock, ...input }) => {
        before = await readLock(lockName);
        renewal = await invokeFunction('acquire-lock', {
          lockName: sfnLock.lockName,
          owner: sfnLock.owner,
          leaseSeconds: 600,
        });
        afterRenewal = await readLock(lockName);
        return input;
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    const { sfnLock } = run.record.workloadCalls[0].payload;
    assert.equal(renewal.outcome, 'renewed');
    assert.equal(renewal.fencingToken, sfnLock.fencingToken, 'a renewal keeps the token');
    assert.equal(afterRenewal.fencingToken, sfnLock.fencingToken);
    assert.equal(afterRenewal.owner, run.executionArn);
    assert.ok(Date.parse(renewal.expiresAt) > Date.parse(sfnLock.expiresAt), 'the lease ends later');
    assert.equal(afterRenewal.expiresAt, Date.parse(renewal.expiresAt));
    assert.equal(afterRenewal.acquiredAt, before.acquiredAt, 'acquiredAt stays the grant time');
    await assertReleased(lockName, sfnLock.fencingToken);
  });

  test('after another owner took over: LockUnavailable, and the item is unchanged', async () => {
    const lockName = uniqueLockName('renew-taken');
    const other = otherOwner('took-over');
    let takeover;
    let beforeRenewal;
    let renewalError;
    let afterRenewal;
    const run = await runExecution(withLock(lockName), { job: 'stalled' }, {
      scenario: 'renew-taken',
      workload: async ({ sfnLock }) => {
        // The workload stalls past its lease; another owner takes the lock over.
        await expireLock(lockName);
        takeover = await acquireAs(other, lockName);
        beforeRenewal = await readLock(lockName);
        try {
          await invokeFunction('acquire-lock', { lockName: sfnLock.lockName, owner: sfnLock.owner, leaseSeconds: 600 });
        } catch (error) {
          renewalError = error;
        }
        afterRenewal = await readLock(lockName);
        // A workload that lost its lock stops, with the error it got.
        throw renewalError;
      },
    });

    const { sfnLock } = run.record.workloadCalls[0].payload;
    assert.equal(takeover.outcome, 'granted');
    assert.ok(takeover.fencingToken > sfnLock.fencingToken, 'the takeover got a higher token');
    assert.ok(renewalError, 'the renewal did not fail');
    assert.equal(renewalError.name, 'LockUnavailable');
    const { errorMessage } = JSON.parse(renewalError.message);
    assert.equal(JSON.parse(errorMessage).holder, other);
    assert.deepEqual(afterRenewal, beforeRenewal, 'the failed renewal changed nothing');

    // The execution fails with that error; its release leaves the new holder alone.
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockUnavailable');
    assert.deepEqual(run.record.releases.map((release) => release.result?.outcome), ['held_by_other']);
    const lock = await readLock(lockName);
    assert.equal(lock.owner, other);
    assert.equal(lock.fencingToken, takeover.fencingToken);
  });
});
