// The per-key variant docs/modes.md documents (every lock state takes
// "lockName.$": "$$.Execution.Input.customerId"), and lock-function refusals
// passing through the ASL: an InvalidLockRequest or LockStoreMisconfigured
// from Acquire Lock fails the execution with that very error, runs no
// workload and is not retried.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  closeClients,
  lockedWorkflowFor,
  readLock,
  runExecution,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(2));
after(closeClients);

const LOCK_STATES = ['Acquire Lock', 'Release Lock', 'Release Lock After Failure'];

/** locked-workflow.asl.json with the per-key change of docs/modes.md applied to every lock state. */
function perKeyDefinition() {
  const definition = lockedWorkflowFor('unused-fixed-name');
  for (const name of LOCK_STATES) {
    const payload = definition.States[name].Parameters.Payload;
    delete payload.lockName;
    payload['lockName.$'] = '$$.Execution.Input.customerId';
  }
  return definition;
}

describe('per-key locks', () => {
  test('one customer waits for its own lock only; another customer runs meanwhile', async () => {
    const definition = perKeyDefinition();
    const [alice, bob] = [uniqueLockName('customer-alice'), uniqueLockName('customer-bob')];
    let releaseFirst;
    const firstMayFinish = new Promise((resolve) => {
      releaseFirst = resolve;
    });
    const first = startExecution(definition, { customerId: alice, n: 1 }, {
      scenario: 'per-key-first',
      workload: async (payload) => {
        await firstMayFinish; // holds alice's lock until the test lets go
        return payload;
      },
    });
    await first.record.waitFor((record) => record.workloadCalls.length === 1, 'alice\'s first workload to start');

    const sameKey = startExecution(definition, { customerId: alice, n: 2 }, { scenario: 'per-key-same' });
    const otherKey = await runExecution(definition, { customerId: bob, n: 3 }, { scenario: 'per-key-other' });
    assert.equal(otherKey.status, 'SUCCEEDED', JSON.stringify(otherKey));
    await sameKey.record.waitFor(
      (record) => record.errorsOf(record.acquireAttempts).includes('LockUnavailable'),
      'the second alice execution to find her lock held',
    );
    assert.equal(sameKey.record.workloadCalls.length, 0, 'the same key waits');
    assert.equal((await readLock(alice)).owner, first.executionArn);

    releaseFirst();
    const [firstOutcome, sameOutcome] = await Promise.all([first.outcome, sameKey.outcome]);
    assert.equal(firstOutcome.status, 'SUCCEEDED', JSON.stringify(firstOutcome));
    assert.equal(sameOutcome.status, 'SUCCEEDED', JSON.stringify(sameOutcome));
    assert.ok(sameKey.record.workloadCalls[0].enteredAt >= first.record.workloadCalls[0].exitedAt);
    for (const key of [alice, bob]) assert.equal((await readLock(key)).held, false, key);
    assert.equal((await readLock('unused-fixed-name')).exists, false, 'no lock under the fixed name');
  });
});

describe('refusals pass through the ASL', () => {
  test('an input without the key: InvalidLockRequest naming lockName, no workload, no retry', async () => {
    const run = await runExecution(perKeyDefinition(), { customerId: '' }, { scenario: 'per-key-empty' });
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'InvalidLockRequest');
    assert.equal(JSON.parse(JSON.parse(run.cause).errorMessage).field, 'lockName');
    assert.equal(run.record.acquireAttempts.length, 1, 'never retried');
    assert.equal(run.record.workloadCalls.length, 0);
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock']);
  });

  test('LockStoreMisconfigured: caught (the grant may have landed), released, fails with that error, no workload', async () => {
    const lockName = uniqueLockName('misconfigured');
    const run = await runExecution(lockedWorkflowFor(lockName), {}, {
      scenario: 'misconfigured',
      afterAcquire: () => {
        const error = new Error(JSON.stringify({ errorType: 'LockStoreMisconfigured', errorMessage: '{"message":"simulated access denied"}' }));
        error.name = 'LockStoreMisconfigured';
        throw error;
      },
    });
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreMisconfigured');
    assert.equal(run.record.acquireAttempts.length, 1, 'never retried');
    assert.equal(run.record.workloadCalls.length, 0);
    assert.deepEqual(run.record.releases.map((release) => release.state), ['Release Lock After Failure']);
    assert.equal((await readLock(lockName)).held, false);
  });
});
