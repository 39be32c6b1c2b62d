// The recipe for adding the lock to a state machine by hand: the one json block
// between <!-- recipe:begin --> and <!-- recipe:end --> in docs/modes.md, substituted with
// the test values and run end to end with the real binaries, exactly as a reader would
// paste it. Its lock states must stay equal to locked-workflow.asl.json's, field by
// field (Comments aside), so that the recipe cannot drift from the shipped definition.

import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';

import {
  LOCK_RESULT_PATH,
  TEST_SUBSTITUTIONS,
  acquireAs,
  closeClients,
  lockedWorkflowFor,
  namedError,
  readLock,
  docsRecipe,
  releaseAs,
  runExecution,
  startExecution,
  substituteDefinition,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(warmUp);
after(closeClients);

const recipeFor = (lockName, values = {}) =>
  substituteDefinition(docsRecipe(), { ...TEST_SUBSTITUTIONS, LockName: lockName, ...values }, 'docs/modes.md recipe');

/** The definition without any Comment, at any depth: comments may differ. */
function withoutComments(value) {
  if (Array.isArray(value)) return value.map(withoutComments);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== 'Comment')
        .map(([key, inner]) => [key, withoutComments(inner)]),
    );
  }
  return value;
}

async function assertReleased(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

describe("the recipe in docs/modes.md", () => {
  for (const [label, lockResultPath] of Object.entries(LOCK_RESULT_PATH)) {
    test(`its lock states equal locked-workflow.asl.json's, field by field (PassLockToWorkload ${label})`, () => {
      const values = { LockResultPath: lockResultPath };
      const recipe = withoutComments(recipeFor('recipe-compare', values));
      const shipped = withoutComments(lockedWorkflowFor('recipe-compare', values));

      const { States: recipeStates, ...recipeTop } = recipe;
      const { States: shippedStates, ...shippedTop } = shipped;
      assert.deepEqual(recipeTop, shippedTop, 'TimeoutSeconds and StartAt');
      assert.deepEqual(Object.keys(recipeStates).sort(), Object.keys(shippedStates).sort(), 'the same states');
      for (const [name, state] of Object.entries(shippedStates)) {
        if (state.Type === 'Parallel') {
          // The branch is the user's own states; everything around it is the lock's.
          const { Branches: recipeBranches, ...recipeParallel } = recipeStates[name];
          const { Branches: shippedBranches, ...shippedParallel } = state;
          assert.deepEqual(recipeParallel, shippedParallel, `${name} (without its branch)`);
          assert.equal(recipeBranches.length, 1, `${name}: one branch`);
        } else {
          assert.deepEqual(recipeStates[name], state, name);
        }
      }
    });
  }

  test('uncontended: the workload runs, its output is the output, the lock is released', async () => {
    const lockName = uniqueLockName('recipe-ok');
    const input = { job: 'nightly', day: '2026-11-30' };
    let lockDuringWorkload;
    const run = await runExecution(recipeFor(lockName), input, {
      scenario: 'recipe-ok',
      workload: async (payload) => {
        lockDuringWorkload = await readLock(lockName);
        return { processed: payload.day };
      },
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { processed: '2026-11-30' });
    assert.deepEqual(run.record.workloadCalls.map((call) => call.payload), [input]);
    assert.equal(lockDuringWorkload.owner, run.executionArn);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result.outcome]), [['Release Lock', 'released']]);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });

  test('contended: it waits for the holder, and runs the workload only after the release', async () => {
    const lockName = uniqueLockName('recipe-contended');
    const holder = 'arn:aws:states:us-east-1:123456789012:execution:other-workflow:holder';
    await acquireAs(holder, lockName);
    const started = startExecution(recipeFor(lockName), { job: 'waits' }, { scenario: 'recipe-contended' });
    await started.record.waitFor(
      (record) => record.errorsOf(record.acquireAttempts).filter((error) => error === 'LockUnavailable').length >= 2,
      'two LockUnavailable answers',
    );
    assert.equal(started.record.workloadCalls.length, 0, 'the workload started while another owner held the lock');
    const releasedAt = performance.now();
    await releaseAs(holder, lockName);

    const run = await started.outcome;
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.ok(started.record.workloadCalls[0].enteredAt > releasedAt, 'the workload ran only after the holder released');
    assert.equal(started.record.lease.outcome, 'granted');
    await assertReleased(lockName, started.record.lease.fencingToken);
  });

  test('a workload failure releases the lock and fails the execution with the original error', async () => {
    const lockName = uniqueLockName('recipe-fails');
    const cause = JSON.stringify({ errorType: 'WorkloadExploded', errorMessage: 'disk full on /data' });
    const run = await runExecution(recipeFor(lockName), { job: 'fill-disk' }, {
      scenario: 'recipe-fails',
      workload: () => {
        throw namedError('WorkloadExploded', cause);
      },
    });
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'WorkloadExploded');
    assert.equal(run.cause, cause);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });
});
