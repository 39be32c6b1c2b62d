// State transitions per locked execution, counted from aws-local-stepfunctions'
// execution event log (its library API), for `make bench`.
//
// Step Functions (Standard) bills one transition per state executed, retries
// included. In the interpreter's event log that is one StateEntered per state
// executed (Parallel branches' states included) plus one StateRetried per retry
// of a Task. This script runs the real definitions in statemachine/ with stub
// Lambda handlers (transitions do not depend on what a function computes, only
// on success or the error name it raises) and counts, per scenario:
//   - the workload alone: the branch of "Run Workload Under Lock", as its own
//     state machine (what the user would run without the lock);
//   - the locked workflow, uncontended and after k failed acquire attempts
//     (LockUnavailable, k wait rounds), giving "added by the lock" and the cost
//     of one extra wait round;
//   - the attach-existing wrapper, whose whole parent execution is the lock's
//     cost (the wrapped state machine's own transitions happen either way);
//   - skip-if-running, uncontended (as the locked workflow) and skipped (the
//     lock held: the whole execution is the cost of a skipped run).
//
// Usage: node bench/transitions.mjs [--rounds 0,1,2,5]    (prints one JSON object)

import { readFileSync } from 'node:fs';
import { StateMachine } from 'aws-local-stepfunctions';

const STATE_MACHINE_DIR = new URL('../statemachine/', import.meta.url);
const ACCOUNT = '123456789012';
const REGION = 'us-east-1';
const fn = (name) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:bench-${name}`;

// The placeholders statemachine/*.asl.json documents (DefinitionSubstitutions).
const SUBSTITUTIONS = {
  AcquireLockFunctionArn: fn('AcquireLock'),
  ReleaseLockFunctionArn: fn('ReleaseLock'),
  WorkloadFunctionArn: fn('Workload'),
  TargetStateMachineArn: `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:bench-target`,
  // What template.yaml builds for the attach variant's Stop Target Execution.
  TargetExecutionArnPrefix: `arn:aws:states:${REGION}:${ACCOUNT}:execution:bench-target:`,
  LockName: 'bench-transitions',
  LeaseMarginSeconds: 300,
  MaxWaitSeconds: 3600,
  WorkloadTimeoutSeconds: 60,
  TargetTimeoutSeconds: 3600,
  WorkloadMaxRunSeconds: 900,
  // The template's default: a mutex (transitions do not depend on the limit).
  LockLimit: 1,
  // The template's default (PassLockToWorkload false): the lock stays out of the data.
  LockResultPath: 'null',
  // The template's AWS::Partition: the ASL's own ARNs (the Lambda and Step Functions integrations).
  Partition: 'aws',
};

function load(file) {
  const text = readFileSync(new URL(file, STATE_MACHINE_DIR), 'utf8');
  const substituted = text.replace(/\$\{([A-Za-z0-9_]+)\}/g, (whole, name) => {
    if (!(name in SUBSTITUTIONS)) throw new Error(`${file}: no value for ${whole}`);
    return String(SUBSTITUTIONS[name]);
  });
  return JSON.parse(substituted);
}

function namedError(name, cause) {
  const error = new Error(cause);
  error.name = name;
  return error;
}

const invokeResult = (payload) => ({ ExecutedVersion: '$LATEST', Payload: payload, StatusCode: 200 });

/** Stub lambda:invoke handlers: acquire fails `waitRounds` times with LockUnavailable, then grants. */
function handlers(waitRounds) {
  let attempts = 0;
  const lease = (payload) => ({
    lockName: payload.lockName,
    owner: payload.owner,
    fencingToken: 1,
    acquiredAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 3_900_000).toISOString(),
    leaseSeconds: 3900,
    outcome: 'granted',
  });
  return {
    'Acquire Lock': async ({ Payload }) => {
      attempts += 1;
      if (attempts <= waitRounds) {
        // As Step Functions reports a function error: Cause = the whole error payload,
        // whose errorMessage is acquire-lock's own JSON (skip-if-running parses it).
        const message = { message: 'held', lockName: Payload.lockName, holder: 'arn:other', expiresAt: new Date().toISOString() };
        throw namedError('LockUnavailable', JSON.stringify({ errorType: 'LockUnavailable', errorMessage: JSON.stringify(message) }));
      }
      return invokeResult(lease(Payload));
    },
    'Run Workload': async ({ Payload }) => invokeResult({ ...Payload, done: true }),
    'Release Lock': async ({ Payload }) =>
      invokeResult({ lockName: Payload.lockName, owner: Payload.owner, released: true, outcome: 'released' }),
    'Release Lock After Failure': async ({ Payload }) =>
      invokeResult({ lockName: Payload.lockName, owner: Payload.owner, released: true, outcome: 'released' }),
    'Run Target State Machine': async ({ Input }) => ({ Status: 'SUCCEEDED', Input, Output: { done: true } }),
  };
}

const retryOverrides = (definition) =>
  Object.fromEntries(
    Object.entries(definition.States)
      .filter(([, state]) => Array.isArray(state.Retry))
      .map(([name, state]) => [name, state.Retry.map(() => 0)]),
  );

async function count(definition, waitRounds, name) {
  const executionArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:bench:${name}`;
  const execution = new StateMachine(definition, { validationOptions: { checkPaths: false } }).run(
    { orderId: 42 },
    {
      context: { Execution: { Id: executionArn, Name: name, StartTime: new Date().toISOString(), RedriveCount: 0 } },
      overrides: { taskResourceLocalHandlers: handlers(waitRounds), retryIntervalOverrides: retryOverrides(definition) },
    },
  );
  const byType = {};
  const entered = [];
  for await (const event of execution.eventLogs) {
    byType[event.type] = (byType[event.type] ?? 0) + 1;
    if (event.type === 'StateEntered') entered.push(event.state.name);
  }
  let status = 'SUCCEEDED';
  try {
    await execution.result;
  } catch (error) {
    status = `FAILED: ${error.message}`;
  }
  const transitions = (byType.StateEntered ?? 0) + (byType.StateRetried ?? 0);
  return { scenario: name, waitRounds, status, transitions, entered, events: byType };
}

async function main() {
  const roundsArg = process.argv.indexOf('--rounds');
  const rounds = roundsArg > 0 ? process.argv[roundsArg + 1].split(',').map(Number) : [0, 1, 2, 5];

  const locked = load('locked-workflow.asl.json');
  const parallel = locked.States['Run Workload Under Lock'];
  if (!parallel || parallel.Type !== 'Parallel' || parallel.Branches.length !== 1) {
    throw new Error('locked-workflow.asl.json: expected a one-branch Parallel "Run Workload Under Lock"');
  }
  const workloadAlone = parallel.Branches[0];

  const results = [await count(workloadAlone, 0, 'workload-alone')];
  for (const k of rounds) results.push(await count(locked, k, `locked-${k}-wait-rounds`));

  let attach;
  try {
    attach = load('attach-existing.asl.json');
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  if (attach) for (const k of [0, 2]) results.push(await count(attach, k, `attach-existing-${k}-wait-rounds`));

  // One refused acquire is a skip: the handler's first attempt fails, as when held.
  const skip = load('skip-if-running.asl.json');
  for (const k of [0, 1]) results.push(await count(skip, k, `skip-if-running-${k}-held`));

  const failed = results.filter((result) => result.status !== 'SUCCEEDED');
  const base = results[0].transitions;
  const lockedRuns = results.filter((r) => r.scenario.startsWith('locked-'));
  const uncontended = lockedRuns.find((r) => r.waitRounds === 0);
  const maxRun = lockedRuns.reduce((a, b) => (b.waitRounds > a.waitRounds ? b : a));
  const perRound = maxRun.waitRounds > 0 ? (maxRun.transitions - uncontended.transitions) / maxRun.waitRounds : null;
  const attach0 = results.find((r) => r.scenario === 'attach-existing-0-wait-rounds');
  console.log(
    JSON.stringify({
      rule: 'transitions = StateEntered + StateRetried events (one per state executed, retries included)',
      workloadAlone: base,
      lockedUncontended: uncontended.transitions,
      addedByLockUncontended: uncontended.transitions - base,
      perExtraWaitRound: perRound,
      attachExistingUncontended: attach0?.transitions ?? null,
      skipIfRunningUncontended: results.find((r) => r.scenario === 'skip-if-running-0-held').transitions,
      skipIfRunningSkipped: results.find((r) => r.scenario === 'skip-if-running-1-held').transitions,
      failed: failed.map((r) => `${r.scenario}: ${r.status}`),
      results,
    }),
  );
  if (failed.length > 0) process.exitCode = 1;
}

await main();
