// Callback tasks (lambda:invoke.waitForTaskToken), through the local Step Functions
// endpoint (tests/support/sfn_endpoint.py). The interpreter does not emulate them, so
// the endpoint mints task tokens, takes the binaries' SendTaskSuccess / Failure on them
// and keeps each token's clock; this module runs one such task attempt the way Step
// Functions does, and lets tests look at (or break) the endpoint's calls.

import { performance } from 'node:perf_hooks';

import { BINARY_BY_FUNCTION_ARN, PARTITION } from './definitions.mjs';
import { namedError, stackEnv } from './local-stack.mjs';

export const LAMBDA_INVOKE = `arn:${PARTITION}:states:::lambda:invoke`;
export const WAIT_FOR_TASK_TOKEN = `${LAMBDA_INVOKE}.waitForTaskToken`;
/** The AWS SDK integrations the attach variant stops its child with, and reads its status by. */
export const SFN_STOP_EXECUTION = `arn:${PARTITION}:states:::aws-sdk:sfn:stopExecution`;
export const SFN_DESCRIBE_EXECUTION = `arn:${PARTITION}:states:::aws-sdk:sfn:describeExecution`;

/**
 * What $$.Task.Token resolves to in the interpreter (it has no Task in its context object
 * unless given one); each callback task replaces it with the token it minted.
 */
export const TASK_TOKEN_PLACEHOLDER = 'sfn-lock-e2e:task-token-placeholder';

/** Calls one of the endpoint's /_local/ routes (tests/support/sfn_endpoint.py). */
async function endpoint(route, body) {
  const { sfnEndpoint } = stackEnv();
  if (!sfnEndpoint) throw new Error('SFN_LOCK_SFN_ENDPOINT is unset: run under scripts/local-stack.sh');
  const init = body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
  const response = await fetch(`${sfnEndpoint}/_local/${route}`, init);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`local Step Functions endpoint, ${route}: HTTP ${response.status}: ${text}`);
  return JSON.parse(text);
}

// Real tokens are base64 with '/' and '+', so a token in a URL path is percent-encoded.
const tokenRoute = (token, action) => `tokens/${encodeURIComponent(token)}/${action}`;

/** Every SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat so far: `[{action, taskToken, result, at}]`. */
export function endpointCalls() {
  return endpoint('calls');
}

/**
 * Makes the next `count` calls of `action` (e.g. 'SendTaskSuccess') fail: `status` 500
 * (an error answer), 'drop' (the connection closes, nothing done) or 'lose_answer' (the
 * call takes effect, then the connection closes without its answer). With `execution`,
 * only calls on that execution's tokens.
 */
export function injectFault(action, count = 1, status = 500, execution = undefined) {
  return endpoint('faults', { action, count, status, execution });
}

/** A token's state: `{status: OPEN | SUCCEEDED | FAILED | TIMED_OUT | STOPPED | CLOSED, ...}`. */
export function tokenOutcome(token, waitSeconds = 0) {
  return endpoint(`${tokenRoute(token, 'outcome')}?waitSeconds=${waitSeconds}`);
}

/** Closes a token that is still open (later SendTask* calls get TaskTimedOut); answers its outcome. */
export function closeToken(token, reason) {
  return endpoint(tokenRoute(token, 'close'), { reason });
}

/** Every Task state of a definition, in branches and map iterators too: [name, state]. */
export function* taskStates(states) {
  for (const [name, state] of Object.entries(states ?? {})) {
    if (state.Type === 'Task') yield [name, state];
    for (const branch of state.Branches ?? []) yield* taskStates(branch.States);
    yield* taskStates((state.ItemProcessor ?? state.Iterator)?.States);
  }
}

/**
 * A callback task's timeout as Step Functions applies it. TimeoutSecondsPath would need the
 * state's input, which a handler does not see: no definition here uses it.
 */
export function callbackTimeoutSeconds(name, state) {
  if (state.TimeoutSecondsPath !== undefined) throw new Error(`${name}: TimeoutSecondsPath on a callback task is not emulated`);
  return state.TimeoutSeconds ?? 99_999_999; // Step Functions' default for a Task
}

/**
 * The definition the interpreter runs. It races a Task's handler against the state's
 * TimeoutSeconds itself (leaving the handler running), with its own clock. For a callback
 * task the endpoint keeps the clock instead: the token is minted with the state's
 * TimeoutSeconds and closes then, atomically with SendTaskSuccess, so that, as in Step
 * Functions, a callback either lands before the timeout (the task succeeds) or gets
 * TaskTimedOut (the task timed out), never both. So in the interpreter's copy such a
 * state's TimeoutSeconds is only a backstop, later (and under setTimeout's 2^31 ms limit).
 */
const runnable = new WeakMap();
export function runnableDefinition(definition) {
  if (!runnable.has(definition)) {
    let copy = definition;
    if ([...taskStates(definition.States)].some(([, state]) => state.Resource === WAIT_FOR_TASK_TOKEN)) {
      copy = structuredClone(definition);
      for (const [name, state] of taskStates(copy.States)) {
        if (state.Resource !== WAIT_FOR_TASK_TOKEN) continue;
        state.TimeoutSeconds = Math.min(callbackTimeoutSeconds(name, state) + 30, 2_000_000);
      }
    }
    runnable.set(definition, copy);
  }
  return runnable.get(definition);
}

/** `value` with every TASK_TOKEN_PLACEHOLDER string replaced by `token`; throws if there is none. */
function withTaskToken(value, token, stateName) {
  let found = false;
  const replaced = JSON.parse(JSON.stringify(value), (key, item) => {
    if (item !== TASK_TOKEN_PLACEHOLDER) return item;
    found = true;
    return token;
  });
  if (!found) throw new Error(`${stateName}: a .waitForTaskToken task whose Parameters never pass $$.Task.Token`);
  return replaced;
}

/**
 * The callback tasks of one execution: `handler(stateName, timeoutSeconds)` serves one
 * .waitForTaskToken state, `closeOpen(reason)` kills the tokens it still waits on once
 * the execution ends (or is stopped). `acquire(payload)` is the execution's acquire-lock
 * call (recorded in `record` and hooked as an acquire attempt).
 */
export function callbackTasks(executionArn, record, acquire) {
  // Tokens minted and not yet ended; `ended` says why the execution let them go.
  const openTokens = new Set();
  let ended;
  const closeOpen = async (reason) => {
    ended ??= reason;
    await Promise.all([...openTokens].map((token) => closeToken(token, reason)));
  };

  /**
   * lambda:invoke.waitForTaskToken as Step Functions runs it: a fresh token per attempt,
   * put where the Parameters put $$.Task.Token; the invoke (recorded and hooked as an
   * acquire attempt); a failed invoke fails the task with its error and kills the token,
   * unless the token ended first (then that decides). Otherwise the task ends when the
   * token does: SendTaskSuccess's output is the task's result as it is (no Payload
   * wrapper), SendTaskFailure's error and cause its error, the timeout States.Timeout.
   * (States.Timeout here is a plain named error: a "States.TaskFailed" catcher, which must
   * not match a timeout, would match it; the definitions name States.Timeout explicitly.)
   */
  const handler = (stateName, timeoutSeconds) => async (parameters) => {
    const { taskToken } = await endpoint('tokens', { execution: executionArn, state: stateName, timeoutSeconds });
    const callback = { state: stateName, taskToken, mintedAt: performance.now(), status: 'OPEN' };
    record.callbacks.push(callback);
    openTokens.add(taskToken);
    try {
      if (ended) await closeToken(taskToken, ended); // stopped while this token was being minted
      const { FunctionName: functionName, Payload: payload } = withTaskToken(parameters, taskToken, stateName);
      if (BINARY_BY_FUNCTION_ARN[functionName] !== 'acquire-lock') {
        throw namedError('Lambda.ResourceNotFoundException', `no callback function ${functionName}`);
      }
      let outcome;
      try {
        callback.answer = await acquire(payload);
      } catch (error) {
        outcome = await closeToken(taskToken, 'invoke_failed');
        if (!['SUCCEEDED', 'FAILED'].includes(outcome.status)) throw error;
      }
      while (outcome === undefined || outcome.status === 'OPEN') outcome = await tokenOutcome(taskToken, 20);
      Object.assign(callback, outcome, { wokenAt: performance.now() });
      if (outcome.status === 'SUCCEEDED') {
        callback.output = JSON.parse(outcome.output);
        record.lease = callback.output;
        return callback.output;
      }
      if (outcome.status === 'FAILED') throw namedError(outcome.error ?? '', outcome.cause ?? '');
      if (outcome.status === 'TIMED_OUT') throw namedError('States.Timeout', `${stateName}: no callback within ${timeoutSeconds} s`);
      // Stopped with its execution: nobody waits for this answer any more.
      throw namedError('States.Runtime', `${stateName}: task token ${outcome.status}`);
    } finally {
      openTokens.delete(taskToken);
      record.changed();
    }
  };

  return { handler, closeOpen };
}
