// Runs a definition in aws-local-stepfunctions: each lock, workload, child and callback
// state gets a local handler doing what Step Functions' integration does (against the
// local stack), retries pause milliseconds instead of seconds, and every execution
// keeps a RunRecord of what it did.

import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';

import { StateMachine } from 'aws-local-stepfunctions';

import { correctedStatesHash, describeChildExecution, runChildExecution, stopChildExecution } from './child-execution.mjs';
import {
  LAMBDA_INVOKE,
  SFN_DESCRIBE_EXECUTION,
  SFN_STOP_EXECUTION,
  TASK_TOKEN_PLACEHOLDER,
  WAIT_FOR_TASK_TOKEN,
  callbackTasks,
  callbackTimeoutSeconds,
  runnableDefinition,
  taskStates,
} from './callback-tasks.mjs';
import { ACCOUNT, ARNS, BINARY_BY_FUNCTION_ARN, REGION, stateMachineArn } from './definitions.mjs';
import { invokeFunction, invokeResult, namedError } from './local-stack.mjs';
import { RunRecord, outcomeOf } from './run-record.mjs';

/**
 * Retry pauses for the lock states: a few milliseconds instead of the definition's
 * seconds, so the contended and store-down scenarios take well under a minute. Arrays
 * are per retrier, in the order of the state's Retry field.
 */
export const FAST_RETRIES = Object.freeze({
  'Acquire Lock': [20, 20],
  'Run Workload': [10],
  'Run Target State Machine': [10],
  'Stop Target Execution': [10, 10],
  'Describe Target Execution': [10],
  'Release Lock': [10],
  'Release Lock After Failure': [10],
  'Release Lock After Wait Timeout': [10],
});

/**
 * In a retryIntervalOverrides array, leaves that retrier's pause as the definition
 * computes it (IntervalSeconds, BackoffRate, MaxDelaySeconds, JitterStrategy): the
 * interpreter overrides an entry only if it is >= 0 (its documented -1).
 */
export const REAL_PAUSE = -1;

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

/**
 * Starts one execution of `definition` and returns at once with
 * `{ name, executionArn, record, outcome, abort }`; `outcome` settles to
 * `{status, output}` or `{status, error, cause}`; `abort()` stops the execution (as
 * StopExecution) and resolves once its open task tokens are dead.
 *
 * options:
 *   workload(payload, record)   the "Run Workload" function; its return value is the
 *                               Lambda result, a thrown error a function error (use
 *                               namedError). Defaults to echoing its payload.
 *   child                       { definition, abort? } for "Run Target State Machine"; the
 *                               child's Tasks that invoke the workload function
 *                               (ARNS.workload) are served by `workload` too, recorded
 *                               in this execution's workloadCalls.
 *   beforeAcquire(attempt, record)  awaited before each real acquire-lock call
 *                               (attempt counts from 1; a callback task's invoke too);
 *                               fault injection hooks in here.
 *   afterAcquire(attempt, result, record)  may throw to replace a successful answer
 *                               (a lost response).
 *   beforeRelease(state, attempt, record)  awaited before each real release-lock call
 *                               from `state`; may throw to make that release fail.
 *   beforeStop(attempt, record)  awaited before each StopExecution (aws-sdk:sfn:
 *                               stopExecution); may throw to make that call fail.
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
    const startedAt = performance.now();
    try {
      const attempt = record.releases.filter((release) => release.state === state).length + 1;
      await options.beforeRelease?.(state, attempt, record);
      const result = await invokeFunction(binary, payload);
      record.releases.push({ state, payload, startedAt, result, childStatuses });
      return invokeResult(result);
    } catch (error) {
      record.releases.push({ state, payload, startedAt, error: error.name, cause: error.message, childStatuses });
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

  // The callback (.waitForTaskToken) tasks, and the tokens they still wait on.
  const tokens = callbackTasks(executionArn, record, acquire);

  const context = {
    // RedriveCount: 0 for a first run, as in Step Functions' context object.
    Execution: { Id: executionArn, Name: name, RedriveCount: options.redriveCount ?? 0 },
    StateMachine: { Id: stateMachineArn(stateMachineName), Name: stateMachineName },
    Task: { Token: TASK_TOKEN_PLACEHOLDER },
  };
  const runChild = async (parameters) => {
    // The child's name as Step Functions computes it (see correctedStatesHash).
    const nameExpression = definition.States?.['Run Target State Machine']?.Parameters?.['Name.$'];
    const childName = nameExpression === undefined ? undefined : await correctedStatesHash(nameExpression, context);
    const childHandlers = {};
    for (const [stateName, state] of taskStates(options.child?.definition?.States)) {
      if (state.Resource === LAMBDA_INVOKE && state.Parameters?.FunctionName === ARNS.workload) childHandlers[stateName] = runWorkload;
    }
    return runChildExecution({ ...parameters, ...(childName !== undefined && { Name: childName }) }, options.child, record, childHandlers);
  };
  // aws-sdk:sfn:stopExecution and describeExecution: the ARN as Step Functions computes it
  // (correctedStatesHash again, when the definition derives it with States.Hash).
  const executionArnOf = async (stateName, parameters) => {
    const arnExpression = findState(definition.States, stateName)?.Parameters?.['ExecutionArn.$'];
    const arn = arnExpression?.includes('States.Hash(') ? await correctedStatesHash(arnExpression, context) : parameters.ExecutionArn;
    return { ...parameters, ExecutionArn: arn };
  };
  const stopExecution = (stateName) => async (parameters) => {
    const stop = await executionArnOf(stateName, parameters);
    try {
      await options.beforeStop?.(record.stops.length + 1, record);
    } catch (error) {
      record.stops.push({ executionArn: stop.ExecutionArn, error: error.name, at: performance.now() });
      record.changed();
      throw error;
    }
    return stopChildExecution(stop, record);
  };
  const describeExecution = (stateName) => async (parameters) =>
    describeChildExecution(await executionArnOf(stateName, parameters), record);

  const handlers = {
    'Acquire Lock': lambdaInvoke('Acquire Lock'),
    'Release Lock': lambdaInvoke('Release Lock'),
    'Release Lock After Failure': lambdaInvoke('Release Lock After Failure'),
    'Run Workload': runWorkload,
    'Run Target State Machine': runChild,
  };
  // Callback tasks, lock states under other names (the queued workflow's own), workload
  // Tasks under other names, and the attach variant's StopExecution / DescribeExecution.
  for (const [stateName, state] of taskStates(definition.States)) {
    if (state.Resource === WAIT_FOR_TASK_TOKEN) {
      handlers[stateName] = tokens.handler(stateName, callbackTimeoutSeconds(stateName, state));
    } else if (state.Resource === LAMBDA_INVOKE && !(stateName in handlers)) {
      // The workload function under any state name (a Map's or a Parallel's Tasks of
      // one's own), else a lock function.
      handlers[stateName] = state.Parameters?.FunctionName === ARNS.workload ? runWorkload : lambdaInvoke(stateName);
    } else if (state.Resource === SFN_STOP_EXECUTION) {
      handlers[stateName] = stopExecution(stateName);
    } else if (state.Resource === SFN_DESCRIBE_EXECUTION) {
      handlers[stateName] = describeExecution(stateName);
    }
  }
  const execution = stateMachineFor(runnableDefinition(definition)).run(input, {
    context,
    overrides: {
      taskResourceLocalHandlers: handlers,
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
    // An execution that ended (stopped, timed out) kills the tokens it still waits on.
    await tokens.closeOpen(settled.status === 'TIMED_OUT' ? 'timed_out' : 'stopped');
    return settled;
  });
  // StopExecution: the execution ends, then its open task tokens are dead (TaskTimedOut).
  // Resolves once they are, so a test can go on knowing no callback lands on them.
  const abort = async () => {
    execution.abort();
    await tokens.closeOpen('stopped');
  };
  return { name, executionArn, record, outcome, abort };
}

/** The state named `stateName`, at any depth of `states`. */
function findState(states, stateName) {
  for (const [name, state] of taskStates(states)) if (name === stateName) return state;
  return undefined;
}

/** Starts an execution and waits for its outcome: `{ ...outcome, record, executionArn }`. */
export async function runExecution(definition, input, options = {}) {
  const started = startExecution(definition, input, options);
  const outcome = await started.outcome;
  return { ...outcome, record: started.record, executionArn: started.executionArn };
}
