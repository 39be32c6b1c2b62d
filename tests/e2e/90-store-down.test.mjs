// Issue 4's store-down scenario through the state machine: DynamoDB stops answering while
// an execution is in Acquire Lock. acquire-lock gives up once its SDK timeout (4 s) runs
// out and, the execution being inside its wait bound, answers LockUnavailable marked
// storeUnavailable (one more reason to wait: DESIGN.md, Errors); the ASL's wait retrier
// retries it, and once the store is back the run completes.
//
// The store is paused with SIGSTOP (moto keeps its data in memory, so a restart would
// lose it), which stalls every DynamoDB caller: this file must run alone, and last. The
// numeric prefix orders it after the others, and the suite runs with
// --test-concurrency=1, so no other test file is running meanwhile.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  closeClients,
  lockedWorkflowFor,
  readLock,
  stackEnv,
  startExecution,
  storeDrained,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(warmUp);

after(closeClients);

test('the lock store goes down during Acquire Lock: the wait goes on and the run completes', async () => {
  const { dynamodbPid } = stackEnv();
  assert.ok(dynamodbPid, 'SFN_LOCK_DYNAMODB_PID is unset: run under scripts/local-stack.sh');
  const lockName = uniqueLockName('store-down');
  let paused = false;
  const resume = () => {
    if (paused) process.kill(dynamodbPid, 'SIGCONT');
    paused = false;
  };
  let storeBack;
  const storeIsBack = new Promise((resolve) => {
    storeBack = resolve;
  });

  try {
    const started = startExecution(
      lockedWorkflowFor(lockName),
      { job: 'survive-an-outage' },
      {
        scenario: 'store-down',
        workload: (payload) => ({ survived: payload.job }),
        beforeAcquire: async (attempt) => {
          // Down exactly while the first attempt talks to it.
          if (attempt === 1) {
            process.kill(dynamodbPid, 'SIGSTOP');
            paused = true;
          }
          // The retry goes ahead only once the test has looked at the table (below).
          if (attempt === 2) await storeIsBack;
        },
      },
    );

    await started.record.waitFor(
      (record) => record.errorsOf(record.acquireAttempts).includes('LockUnavailable'),
      'acquire-lock to report the store down (LockUnavailable, storeUnavailable)',
    );
    resume();
    // Every request the pause stalled is answered before the test looks: a
    // stalled write that landed later could change what it sees.
    await storeDrained();
    // No partial state: the stalled attempt's writes either never landed (no item) or
    // landed whole, granting the lock to this very execution; nobody else holds it.
    const lockAfterOutage = await readLock(lockName);
    assert.ok(
      !lockAfterOutage.exists || lockAfterOutage.owner === started.executionArn,
      `unexpected lock state after the outage: ${JSON.stringify(lockAfterOutage)}`,
    );
    storeBack();

    const outcome = await started.outcome;
    assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.deepEqual(outcome.output, { survived: 'survive-an-outage' });

    const [first, ...rest] = started.record.acquireAttempts;
    assert.equal(first.error, 'LockUnavailable');
    const message = JSON.parse(JSON.parse(first.cause).errorMessage);
    assert.equal(message.storeUnavailable, true, JSON.stringify(message));
    assert.equal(message.holder, null);
    // A stalled write that landed makes the retry a renewal of this execution's own grant.
    const { outcome: answer } = rest.at(-1).result;
    assert.ok(lockAfterOutage.exists ? answer === 'renewed' : ['granted', 'renewed'].includes(answer), answer);
    const retried = started.record.events.filter((event) => event.type === 'StateRetried' && event.state.name === 'Acquire Lock');
    assert.ok(retried.length >= 1, 'the ASL retried the acquire');

    const lock = await readLock(lockName);
    assert.equal(lock.held, false, `still held by ${lock.owner}`);
    assert.equal(lock.fencingToken, started.record.lease.fencingToken);
  } finally {
    // Never leave the stack's DynamoDB frozen, whatever failed above.
    resume();
    storeBack();
  }
});
