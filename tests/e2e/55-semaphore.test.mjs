// A semaphore end to end: the real ASL with LockLimit 2 (the template's parameter,
// substituted as DefinitionSubstitutions does), the real acquire-lock / release-lock
// binaries, per-key lock names from the execution input. Three executions of one key
// started together: two run at once, the third waits with LockUnavailable naming the
// limit and both holders, and runs once a permit frees; every release passes the limit
// and frees only its own permit. The skip-if-running variant with LockLimit 2 skips
// only the third.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  closeClients,
  lockedWorkflowFor,
  readLock,
  runExecution,
  skipIfRunningFor,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(3));
after(closeClients);

const LOCK_STATES = ['Acquire Lock', 'Release Lock', 'Release Lock After Failure'];

/** docs/modes.md's per-key change applied to every lock state. */
function perKey(definition) {
  for (const name of LOCK_STATES) {
    const payload = definition.States[name].Parameters.Payload;
    delete payload.lockName;
    payload['lockName.$'] = '$$.Execution.Input.customerId';
  }
  return definition;
}

function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A workload that holds its permit until its gate opens, counting who is inside. */
function gatedWorkload(inside, gates) {
  return async (payload) => {
    inside.now += 1;
    inside.max = Math.max(inside.max, inside.now);
    try {
      await gates[payload.n].opened;
      return payload;
    } finally {
      inside.now -= 1;
    }
  };
}

describe('semaphore (LockLimit 2), per key', () => {
  test('two run at once, the third waits naming the limit and both holders, then runs', async () => {
    const definition = perKey(lockedWorkflowFor('unused-fixed-name', { LockLimit: 2 }));
    const key = uniqueLockName('semaphore-key');
    const inside = { now: 0, max: 0 };
    const gates = [gate(), gate(), gate()];
    const runs = [0, 1, 2].map((n) =>
      startExecution(definition, { customerId: key, n }, {
        scenario: `semaphore-${n}`,
        workload: gatedWorkload(inside, gates),
      }),
    );
    const entered = () => runs.filter((run) => run.record.workloadCalls.length > 0);
    await Promise.all(runs.map((run) =>
      run.record.waitFor(
        (record) => record.workloadCalls.length > 0 || record.errorsOf(record.acquireAttempts).includes('LockUnavailable'),
        'each execution to enter or to wait',
      )));
    const [waiting] = runs.filter((run) => run.record.workloadCalls.length === 0);
    assert.equal(entered().length, 2, 'two permits, two workloads');
    const refusal = waiting.record.acquireAttempts.find((attempt) => attempt.error === 'LockUnavailable');
    const message = JSON.parse(JSON.parse(refusal.cause).errorMessage);
    assert.equal(message.limit, 2);
    assert.equal(message.liveHolders, 2);
    assert.deepEqual(
      message.holders.map((holder) => holder.owner).sort(),
      entered().map((run) => run.executionArn).sort(),
    );

    // One holder finishes: its release frees its own permit, and the waiter gets it.
    const [first, second] = entered();
    gates[first.record.workloadCalls[0].payload.n].open();
    assert.equal((await first.outcome).status, 'SUCCEEDED');
    await waiting.record.waitFor((record) => record.workloadCalls.length === 1, 'the waiter to run');
    assert.equal(second.record.workloadCalls[0].exitedAt, undefined, 'the other holder still runs');
    for (const gateOf of gates) gateOf.open();
    const outcomes = await Promise.all(runs.map((run) => run.outcome));
    for (const outcome of outcomes) assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.equal(inside.max, 2, 'never more than the limit inside');

    const tokens = runs.map((run) => run.record.workloadCalls[0].fencingToken);
    assert.equal(new Set(tokens).size, 3, `one token per grant: ${tokens}`);
    for (const run of runs) {
      const [release] = run.record.releases;
      assert.equal(release.payload.limit, 2, 'the release passes the limit');
      assert.equal(release.result.outcome, 'released');
    }
    assert.equal((await readLock(key)).held, false);
    assert.equal((await readLock('unused-fixed-name')).exists, false);
  });
});

describe('skip if running, LockLimit 2', () => {
  test('the third execution skips, naming a holder; the two holders run', async () => {
    const lockName = uniqueLockName('semaphore-skip');
    const definition = skipIfRunningFor(lockName, { LockLimit: 2 });
    const inside = { now: 0, max: 0 };
    const gates = [gate(), gate()];
    const holders = [0, 1].map((n) =>
      startExecution(definition, { n }, { scenario: `semaphore-skip-${n}`, workload: gatedWorkload(inside, gates) }),
    );
    await Promise.all(holders.map((run) =>
      run.record.waitFor((record) => record.workloadCalls.length === 1, 'both holders to run')));

    const skipped = await runExecution(definition, { n: 2 }, {
      scenario: 'semaphore-skip-third',
      workload: () => assert.fail('the third workload must not run'),
    });
    assert.equal(skipped.status, 'SUCCEEDED', JSON.stringify(skipped));
    assert.equal(skipped.output.skipped, true);
    assert.ok(holders.map((run) => run.executionArn).includes(skipped.output.lock.holder));
    assert.equal(skipped.output.lock.limit, 2);

    for (const gateOf of gates) gateOf.open();
    for (const outcome of await Promise.all(holders.map((run) => run.outcome))) {
      assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    }
    assert.equal(inside.max, 2);
  });
});
