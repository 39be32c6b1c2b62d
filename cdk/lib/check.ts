// What around() refuses in the chain it is given: the rules of `sfn-lock
// wrap` (crates/sfn-lock-cli/src/wrap/mod.rs lists them and says why; this
// file follows errors.rs, tolerated.rs, unwaited.rs, check.rs and timing.rs),
// checked at synth time on the chain's states as CDK renders them. Each
// refusal is an Error naming the state and what to do (cdk/README.md, "What
// around() refuses"). The lock's Parallel catches every error out of the
// chain and holds the lock workloadMaxRun before it releases, so what is
// refused is what would end the chain, or let it end, while work it started
// may still run: the lock would then be released under that work.
import { CfnResource, Stack } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { AroundOptions, LockCalls } from './around';
import { WORKLOAD_MAY_RUN_ON } from './errors';

/** The catch-alls that include the errors after which work may still run. */
const CATCH_ALLS = ['States.ALL', 'States.TaskFailed'];

/** The Retry CDK's tasks.LambdaInvoke adds unless retryOnServiceExceptions: false. */
const LAMBDA_INVOKE_DEFAULT_RETRY = [
  'Lambda.ClientExecutionTimeoutException', 'Lambda.ServiceException',
  'Lambda.AWSLambdaException', 'Lambda.SdkClientException',
];

/** unwaited.rs' SYNC_FORMS: optimized integrations that start work and have a
 * .sync form that waits for it. */
const SYNC_FORMS = [
  'athena:startQueryExecution', 'batch:submitJob', 'bedrock:createModelCustomizationJob',
  'codebuild:retryBuildBatch', 'codebuild:startBuild', 'codebuild:startBuildBatch',
  'databrew:startJobRun', 'ecs:runTask', 'eks:runJob', 'elasticmapreduce:addStep',
  'elasticmapreduce-containers:startJobRun', 'emr-serverless:startJobRun', 'glue:startJobRun',
  'mediaconvert:createJob', 'sagemaker:createHyperParameterTuningJob', 'sagemaker:createLabelingJob',
  'sagemaker:createProcessingJob', 'sagemaker:createTrainingJob', 'sagemaker:createTransformJob',
  'states:startExecution',
];

const RETRY_CATCH_REMEDY = "remove it and let the lock's own states handle these errors (they hold the "
  + 'lock until the work has stopped, then fail the execution with the error): retry or catch only errors '
  + 'after which the work did not start or has ended, such as Lambda.TooManyRequestsException, or your own '
  + 'error names; a Catch that only re-raises (its states are Choice, Pass and Fail) may stay';
const LAMBDA_INVOKE_REMEDY = 'set retryOnServiceExceptions: false on this tasks.LambdaInvoke (CDK adds this '
  + 'Retry by default) and retry only Lambda.TooManyRequestsException, as lock.lambdaWorkload() does';
const WAITING_REMEDY = "remove it and let the lock's own states handle these errors (they hold the lock "
  + 'until the work has stopped, then fail the execution with the error); retry inside the job or the '
  + 'worker, or start it again from a new execution';
const TOLERANCE_REMEDY = 'set it to 0 (or remove it) so that a failed item fails the Map and the lock\'s '
  + 'own states hold the lock until the work has stopped, and handle failed items inside the item '
  + 'processor, retrying or catching only errors after which the work did not start or has ended';
const INVOKE_REMEDY = 'invoke it synchronously (InvocationType RequestResponse, the default: no '
  + 'invocationType on tasks.LambdaInvoke), or use IntegrationPattern.WAIT_FOR_TASK_TOKEN and have the '
  + 'function send the token back when its work is done';
const SYNC_REMEDY = 'use its .sync form (integrationPattern: sfn.IntegrationPattern.RUN_JOB, or .sync:2, '
  + 'or WAIT_FOR_TASK_TOKEN where the service offers it), which waits until the work has ended';
const SDK_REMEDY = "use the service's optimized integration with .sync if it has one (integrationPattern: "
  + 'sfn.IntegrationPattern.RUN_JOB), or .waitForTaskToken with the work sending the token back when it is done';

type States = Record<string, any>;

/** The refusals of around(): throws the first, as wrap does (the first
 * offender by state name, depth first), and checks again at synth time
 * (states may still get a Retry or a Catch after around()), with whether
 * the lock's states ended up at the top level of their state machine. */
export function checkAround(scope: Construct, work: sfn.IChainable, o: AroundOptions, calls: LockCalls): void {
  const refusal = refuse(work, o, calls);
  if (refusal) throw new Error(`around: ${refusal}`);
  scope.node.addValidation({
    validate: () => {
      const errors: string[] = [];
      const again = refuse(work, o, calls);
      if (again) errors.push(`around: ${again}`);
      const nested = notAtTopLevel(scope, o.prefix ?? '');
      if (nested) errors.push(`around: ${nested}`);
      return errors;
    },
  });
}

/** The first refusal for the chain `work` with the options `o`, if any. */
export function refuse(work: sfn.IChainable, o: AroundOptions, calls: LockCalls): string | undefined {
  const stack = Stack.of(work.startState);
  const states = chainStates(work, o.queryLanguage);
  return lockNameRefusal(o)
    ?? first(states, (name, state, siblings) => nestedAround(name, state, siblings))
    ?? first(states, (name, state) => lockVariables(name, state))
    ?? first(states, (name, state) => timing(name, state, o.workloadTimeout.toSeconds(), calls))
    ?? branchBound(work.startState.stateId, states, o.workloadTimeout.toSeconds())
    ?? first(states, (name, state, siblings) => unsafeRetryCatch(name, state, siblings, stack)
      ?? toleratedFailures(name, state) ?? unwaitedWork(name, state));
}

/** The chain's states (the branch's top level) as CDK renders them, nested
 * ones inside their Parallel's Branches and Map's ItemProcessor. Rendering
 * binds nothing: the states can still be put into the lock's branch. */
function chainStates(work: sfn.IChainable, queryLanguage?: sfn.QueryLanguage): States {
  const states: States = {};
  for (const state of sfn.State.findReachableStates(work.startState, { includeErrorHandlers: true })) {
    states[state.stateId] = state.toStateJson(queryLanguage);
  }
  return states;
}

type Visit = (name: string, state: any, siblings: States) => string | undefined;

/** The first refusal `visit` finds, by state name, depth first (states.rs'
 * for_each_state: Parallel branches and Map processors included). */
function first(states: States, visit: Visit): string | undefined {
  for (const name of Object.keys(states).sort()) {
    const state = states[name];
    if (!state || typeof state !== 'object') continue;
    const found = visit(name, state, states);
    if (found) return found;
    const nested = [...(Array.isArray(state.Branches) ? state.Branches : []), state.ItemProcessor ?? state.Iterator]
      .filter((machine) => machine && typeof machine.States === 'object');
    for (const machine of nested) {
      const inner = first(machine.States, visit);
      if (inner) return inner;
    }
  }
  return undefined;
}

// --- the lock's name and the query language (wrap: --lock-name-path, jsonata_path.rs).

function lockNameRefusal(o: AroundOptions): string | undefined {
  const jsonata = o.queryLanguage === sfn.QueryLanguage.JSONATA;
  const name = o.lockName;
  if (sfn.JsonPath.isEncodedJsonPath(name)) {
    const path: string = (sfn.FieldUtils.renderObject({ lockName: name }) as any)['lockName.$'];
    if (jsonata) {
      return `lockName is the JsonPath ${JSON.stringify(path)} but queryLanguage is JSONATA, whose states take no JsonPath: `
        + "write it as a JSONata expression of the context object, such as '{% $states.context.Execution.Input.customerId %}'";
    }
    // Every path must be in the context object ($$.): the release states
    // run after the chain, and their input ($) is the chain's output.
    // ... and in its execution input: every other context field ($$.State...)
    // differs between the acquire and the releases.
    const contextFields: string[] = path.match(/\$\$[.\w]*/g) ?? [];
    if (path.replace(/\$\$/g, '').includes('$') || !contextFields.every((f) => f.startsWith('$$.Execution.Input'))) {
      return `lockName is the JsonPath ${JSON.stringify(path)}, which reads the state's input: the release states see your `
        + "chain's output, not the execution's input, so they would release another name; read it from the context object, "
        + "such as sfn.JsonPath.stringAt('$$.Execution.Input.customerId')";
    }
    return undefined;
  }
  const expression = /^\s*\{%/.test(name);
  if (expression && !jsonata) {
    return `lockName ${JSON.stringify(name)} is a JSONata expression but queryLanguage is JSONPath (the default), which would `
      + "take it as a literal name: give queryLanguage: sfn.QueryLanguage.JSONATA, or a JsonPath such as sfn.JsonPath.stringAt('$$.Execution.Input.customerId')";
  }
  if (expression && /\$states\.(input|result|errorOutput)\b/.test(name)) {
    return `lockName ${JSON.stringify(name)} reads the state's input or result: the release states see your chain's output, `
      + "not the execution's input, so they would release another name; read it from the context object, such as "
      + "'{% $states.context.Execution.Input.customerId %}'";
  }
  return undefined;
}

// --- around() inside around() (the owner is the execution: one grant for both).

function nestedAround(name: string, state: any, siblings: States): string | undefined {
  const suffix = 'Run Workload Under Lock';
  if (state.Type !== 'Parallel' || !name.endsWith(suffix)) return undefined;
  const prefix = name.slice(0, name.length - suffix.length);
  if (!(`${prefix}Acquire Lock` in siblings)) return undefined;
  return `state "${name}" is the lock's branch of another around() inside this chain: `
    + OWNER_IS_THE_EXECUTION;
}

const OWNER_IS_THE_EXECUTION = "a lock's owner is the execution, so around() inside around(), a Map's item processor or "
  + "a Parallel's branch would share one grant (iterations and branches would all hold it at once, and the first release "
  + 'would free it under the others); use around() at the top level of the state machine only, and for a lock per item '
  + 'start a child state machine with around() at its top level (tasks.StepFunctionsStartExecution, RUN_JOB)';

/** Whether the lock's states (found by their construct ids in `scope`) are
 * in a Map's or Parallel's graph rather than a state machine's own. */
function notAtTopLevel(scope: Construct, prefix: string): string | undefined {
  const acquire = scope.node.tryFindChild(`${prefix}Acquire Lock`) as any;
  // CDK keeps a state's graph, and a branch's or processor's outer graph,
  // in private fields: test/check.test.ts fails if they are renamed.
  const graph = acquire?.containingGraph;
  if (!graph?.superGraph) return undefined;
  return `the lock's states ("${prefix}Acquire Lock", ...) are inside a Map's item processor or a Parallel's branch (or another around()): `
    + OWNER_IS_THE_EXECUTION;
}

// --- variables (check.rs: the lock states' own start with sfnLock).

function lockVariables(name: string, state: any): string | undefined {
  const assigns = [state.Assign, ...(Array.isArray(state.Catch) ? state.Catch.map((c: any) => c?.Assign) : [])];
  for (const assign of assigns) {
    if (!assign || typeof assign !== 'object') continue;
    const variable = Object.keys(assign).find((key) => key.startsWith('sfnLock'));
    if (variable) {
      return `state "${name}" assigns the variable $${variable.replace(/\.\$$/, '')}; variables whose name starts with sfnLock `
        + "are the lock states' own: rename it";
    }
  }
  return undefined;
}

// --- the lease must cover the chain (timing.rs; wrap relies on the user's TimeoutSeconds).

function timing(name: string, state: any, workloadTimeout: number, calls: LockCalls): string | undefined {
  const within = `within workloadTimeout (${workloadTimeout} s), which the lease (workloadTimeout + workloadMaxRun + leaseMargin) covers`;
  if (state.Type === 'Task') {
    const timeout = state.TimeoutSeconds;
    if (timeout === undefined && state.TimeoutSecondsPath === undefined) {
      return `state "${name}" is a Task without TimeoutSeconds (Step Functions then lets it run up to a year, and the lease `
        + `would run out under it): give it a timeout ${within} (taskTimeout: sfn.Timeout.duration(...))`;
    }
    if (typeof timeout !== 'number') {
      return `state "${name}" has its timeout chosen at run time (${JSON.stringify(timeout ?? state.TimeoutSecondsPath)}), which `
        + `the lease cannot be sure to cover: give it a fixed one ${within}`;
    }
    if (timeout > workloadTimeout) {
      return `state "${name}" has TimeoutSeconds ${timeout}, longer than workloadTimeout (${workloadTimeout} s): the lease would `
        + `run out while it runs; shorten its timeout to ${within}, or raise workloadTimeout`;
    }
  }
  if (state.Type === 'Wait') {
    const seconds = state.Seconds;
    if (typeof seconds !== 'number') {
      const how = ['Seconds', 'SecondsPath', 'Timestamp', 'TimestampPath'].find((f) => state[f] !== undefined) ?? 'Seconds';
      return `state "${name}" waits for ${how} ${JSON.stringify(state[how])}, which is known only at run time and may outlast `
        + `the lease: wait a fixed number of seconds ${within} (sfn.WaitTime.duration(...))`;
    }
    if (seconds > workloadTimeout) {
      return `state "${name}" waits ${seconds} s, longer than workloadTimeout (${workloadTimeout} s): the lease would run out `
        + `while it waits; wait ${within}, or raise workloadTimeout`;
    }
  }
  const config = state.ItemProcessor?.ProcessorConfig;
  if (state.Type === 'Map' && config?.Mode === 'DISTRIBUTED' && config?.ExecutionType !== 'STANDARD') {
    return `state "${name}" is a Distributed Map whose child executions are ${config?.ExecutionType ?? 'not STANDARD'}: `
      + 'Step Functions cannot stop Express executions, so after an error one may run on up to 300 s, longer than the '
      + `lock's held wait (workloadMaxRun, ${calls.workloadMaxRun.toSeconds()} s) covers; use mapExecutionType: `
      + 'sfn.StateMachineType.STANDARD (the default), whose children stop with the Map';
  }
  return undefined;
}

/** The chain's longest path, when it can be known, against workloadTimeout:
 * each Task's TimeoutSeconds and Wait's Seconds added along the path
 * (Next, Choice targets and Catch targets alike), a Parallel its longest
 * branch. A Map (its item count is known only at run time) or a loop makes
 * the bound unknown, and nothing is refused: the chain must still end within
 * workloadTimeout (cdk/README.md). A retried Task counts each attempt at its
 * TimeoutSeconds and the waits between; a throttle's few seconds of retries
 * (THROTTLE_ONLY) run nothing and are left to leaseMargin. */
function branchBound(start: string, states: States, workloadTimeout: number): string | undefined {
  const bound = longestPath(start, states, new Map(), new Set());
  if (bound === undefined || bound.seconds <= workloadTimeout) return undefined;
  return `the chain can run ${bound.seconds} s (${bound.path.join(' -> ')}: each Task's TimeoutSeconds and each Wait's Seconds `
    + `along its longest path), longer than workloadTimeout (${workloadTimeout} s): the lease would run out while it runs; `
    + 'raise workloadTimeout to that, or shorten the timeouts';
}

interface Bound { seconds: number; path: string[] }

function longestPath(name: string, states: States, memo: Map<string, Bound | undefined>, visiting: Set<string>): Bound | undefined {
  if (memo.has(name)) return memo.get(name);
  const state = states[name];
  // A loop runs as long as its exit condition holds: unknown.
  if (!state || visiting.has(name)) return undefined;
  visiting.add(name);
  const result = ownBound(state) === undefined ? undefined : withSuccessors(name, state, states, memo, visiting);
  visiting.delete(name);
  memo.set(name, result);
  return result;
}

/** A throttled invoke returns at once: its retries run nothing, and their
 * waits (at most THROTTLE_WAITS_COVERED) are within leaseMargin (at least
 * 180 s), as template.yaml's timing relations count them. */
const THROTTLE_ONLY = ['Lambda.TooManyRequestsException'];
const THROTTLE_WAITS_COVERED = 60;

/** What a Task's retriers add: attempts that each run up to its
 * TimeoutSeconds, and the waits between (ASL's defaults: MaxAttempts 3,
 * IntervalSeconds 1, BackoffRate 2; each wait capped by MaxDelaySeconds). */
function retryBound(state: any): { attempts: number; waits: number } | undefined {
  let attempts = 0;
  let waits = 0;
  for (const retrier of Array.isArray(state.Retry) ? state.Retry : []) {
    const max = retrier?.MaxAttempts ?? 3;
    const interval = retrier?.IntervalSeconds ?? 1;
    const rate = retrier?.BackoffRate ?? 2;
    const cap = retrier?.MaxDelaySeconds ?? Infinity;
    if (![max, interval, rate].every((n) => typeof n === 'number')) return undefined;
    let own = 0;
    for (let k = 0; k < max; k++) own += Math.min(interval * rate ** k, cap);
    const errors: unknown[] = Array.isArray(retrier?.ErrorEquals) ? retrier.ErrorEquals : [];
    if (errors.every((e) => THROTTLE_ONLY.includes(e as string)) && own <= THROTTLE_WAITS_COVERED) continue;
    attempts += max;
    waits += own;
  }
  return { attempts, waits };
}

/** The most one state takes itself, if it can be known. */
function ownBound(state: any): number | undefined {
  if (state.Type === 'Task') {
    if (typeof state.TimeoutSeconds !== 'number') return undefined;
    const retries = retryBound(state);
    return retries === undefined ? undefined : (1 + retries.attempts) * state.TimeoutSeconds + retries.waits;
  }
  if (state.Type === 'Wait') return typeof state.Seconds === 'number' ? state.Seconds : undefined;
  if (state.Type === 'Map') return undefined;
  if (state.Type !== 'Parallel') return 0;
  let longest = 0;
  for (const branch of Array.isArray(state.Branches) ? state.Branches : []) {
    const inner = longestPath(branch?.StartAt, branch?.States ?? {}, new Map(), new Set());
    if (inner === undefined) return undefined;
    longest = Math.max(longest, inner.seconds);
  }
  return longest;
}

function withSuccessors(name: string, state: any, states: States, memo: Map<string, Bound | undefined>, visiting: Set<string>): Bound | undefined {
  const own = ownBound(state) ?? 0;
  const targets = [state.Next, state.Default,
    ...(Array.isArray(state.Choices) ? state.Choices : []).map((c: any) => c?.Next),
    ...(Array.isArray(state.Catch) ? state.Catch : []).map((c: any) => c?.Next)].filter((n) => typeof n === 'string');
  let longest: Bound = { seconds: 0, path: [] };
  for (const target of targets) {
    const after = longestPath(target, states, memo, visiting);
    if (after === undefined) return undefined;
    if (after.seconds > longest.seconds || longest.path.length === 0) longest = after;
  }
  return { seconds: own + longest.seconds, path: [name, ...longest.path] };
}

// --- the user's Retry and Catch (errors.rs).

function unsafeRetryCatch(name: string, state: any, siblings: States, stack: Stack): string | undefined {
  const sideBySide = state.Type === 'Map' || state.Type === 'Parallel';
  if (!Array.isArray(state.Retry) && !Array.isArray(state.Catch)) return undefined;
  const waits = waitsOn(state, stack);
  for (const field of ['Retry', 'Catch']) {
    // Error names an earlier catcher that only re-raises takes first
    // (catchers are tried in order): they still leave the chain.
    const reraised = new Set<string>();
    const taken = (error: string) => reraised.has(error) || reraised.has('States.ALL');
    for (const entry of Array.isArray(state[field]) ? state[field] : []) {
      const errors: string[] = (Array.isArray(entry?.ErrorEquals) ? entry.ErrorEquals : []).filter((e: unknown) => typeof e === 'string');
      // A retrier with MaxAttempts 0 never retries.
      if (field === 'Retry' && entry.MaxAttempts === 0) continue;
      if (field === 'Catch' && reraises(entry.Next, siblings)) {
        errors.forEach((error) => reraised.add(error));
        continue;
      }
      const unsafe = errors.filter((error) => {
        if (taken(error)) return false;
        if (sideBySide || waits) return true;
        if (WORKLOAD_MAY_RUN_ON.includes(error)) return true;
        // A catch-all after catchers that re-raise every error after which an
        // invocation may still run: only a Lambda invoke's other errors prove
        // it ended (an HTTP or SDK call's need not).
        return CATCH_ALLS.includes(error) && !(isLambdaInvoke(state) && WORKLOAD_MAY_RUN_ON.every(taken));
      });
      if (unsafe.length === 0) continue;
      const on = unsafe.join(', ');
      if (sideBySide) {
        const why = field === 'Retry' ? 'a retry starts the items or branches again beside those still running'
          : 'the Catch lets your states go on, and end, and the lock be released, while they still run';
        return `state "${name}" has a ${field} on ${on}: on a Map or Parallel, any error leaves the invocations of the other `
          + `items or branches running after it (Step Functions stops them as states only), and ${why}; ${RETRY_CATCH_REMEDY}`;
      }
      if (waits) {
        const why = field === 'Retry' ? 'a retry starts it a second time beside the first'
          : 'the Catch lets your states go on, and end, and the lock be released, while it runs';
        return `state "${name}" has a ${field} on ${on}: it waits for ${waits}, and no error of it proves that the work did not `
          + 'start or has ended (the same names come from the call that starts it and from the wait for it), so the work may '
          + `still run, and ${why}; ${WAITING_REMEDY}`;
      }
      const which = unsafe.some((e) => CATCH_ALLS.includes(e)) ? ', which includes States.Timeout and the Lambda service errors,' : ',';
      const why = field === 'Retry'
        ? 'a retry starts a second run beside the first, and the lock is released when your states end, while the first may run on'
        : "the Catch handles the error inside the lock's branch, so the lock's own Catch, which would hold the lock until the "
          + 'work has stopped, never sees it: the lock is released at once while the work may run on';
      const cdkDefault = field === 'Retry' && isLambdaInvoke(state)
        && [...errors].sort().join() === [...LAMBDA_INVOKE_DEFAULT_RETRY].sort().join();
      return `state "${name}" has a ${field} on ${on}${which} after which its work may still be running: ${why}; `
        + (cdkDefault ? LAMBDA_INVOKE_REMEDY : RETRY_CATCH_REMEDY);
    }
  }
  return undefined;
}

/** Whether a catcher going to `next` only re-raises: every state it reaches
 * is a Choice, a Pass that goes on, or a Fail, so the error (or another)
 * still leaves the chain, and the lock's Catch holds the lock. */
function reraises(next: unknown, states: States, path: Set<string> = new Set()): boolean {
  if (typeof next !== 'string' || path.has(next)) return false; // a loop never leaves the chain
  const state = states[next];
  if (!state) return false;
  if (state.Type === 'Fail') return true;
  const after = state.Type === 'Pass' && typeof state.Next === 'string' ? [state.Next]
    : state.Type === 'Choice' ? [state.Default, ...(Array.isArray(state.Choices) ? state.Choices : []).map((c: any) => c?.Next)]
      .filter((n) => n !== undefined)
    : undefined;
  if (!after || after.length === 0) return false;
  const on = new Set(path).add(next);
  return after.every((target) => reraises(target, states, on));
}

/** What a Task waits for outside it, if it does (errors.rs' waits_on). */
function waitsOn(state: any, stack: Stack): string | undefined {
  if (state.Type !== 'Task' || typeof state.Resource !== 'string') return undefined;
  const resource: string = state.Resource;
  if (resource.endsWith('.sync') || resource.endsWith('.sync:2')) return 'a job (.sync)';
  if (resource.endsWith('.waitForTaskToken')) return 'a callback (.waitForTaskToken)';
  const parts = arnParts(resource);
  if (parts[2] === 'states' && parts[5] === 'activity') return "an activity's worker";
  if (isActivityReference(resource, stack)) return "an activity's worker";
  return undefined;
}

/** An activity of this app (tasks.StepFunctionsInvokeActivity renders its
 * ARN as a reference to the AWS::StepFunctions::Activity). */
function isActivityReference(resource: string, stack: Stack): boolean {
  if (!resource.includes('${Token[')) return false;
  const resolved: any = stack.resolve(resource);
  const id = resolved?.Ref ?? resolved?.['Fn::GetAtt']?.[0];
  if (typeof id !== 'string') return false;
  return stack.node.findAll().some((c) => CfnResource.isCfnResource(c)
    && c.cfnResourceType === 'AWS::StepFunctions::Activity' && stack.resolve(c.logicalId) === id);
}

function isLambdaInvoke(state: any): boolean {
  const call = integration(state.Resource);
  return !!call && !call.sdk && call.service === 'lambda' && call.action === 'invoke';
}

// --- a Map that tolerates failed items (tolerated.rs).

function toleratedFailures(name: string, state: any): string | undefined {
  for (const field of ['ToleratedFailureCount', 'ToleratedFailurePercentage']) {
    const value = state[field];
    let tolerance: string | undefined;
    if (value !== undefined && value !== 0) tolerance = `${field} ${JSON.stringify(value)}`;
    else if (state[`${field}Path`] !== undefined) {
      tolerance = `${field}Path ${JSON.stringify(state[`${field}Path`])}, which may be above 0 at run time`;
    }
    if (tolerance) {
      return `state "${name}" has ${tolerance}: an item that fails while its work may still run (States.Timeout, `
        + 'States.HeartbeatTimeout, a Lambda service error, or one piece failing beside others) counts as tolerated, the Map '
        + `succeeds, and the lock is released when your states end while that work may run on; ${TOLERANCE_REMEDY}`;
    }
  }
  return undefined;
}

// --- a Task that starts work it does not wait for (unwaited.rs).

interface Integration { sdk: boolean; service: string; action: string; pattern?: string }

/** The integration `arn:PARTITION:states:::...` names, if it is one. */
function integration(resource: unknown): Integration | undefined {
  if (typeof resource !== 'string') return undefined;
  const parts = arnParts(resource);
  if (!(parts.length >= 7 && parts[0] === 'arn' && isPartition(parts[1]) && parts[2] === 'states'
    && parts[3] === '' && parts[4] === '')) return undefined;
  const prefix = parts.slice(0, 5).reduce((n, part) => n + part.length + 1, 0);
  let rest = resource.slice(prefix);
  const sdk = rest.startsWith('aws-sdk:');
  if (sdk) rest = rest.slice('aws-sdk:'.length);
  const colon = rest.indexOf(':');
  if (colon < 0) return undefined;
  const service = rest.slice(0, colon);
  const call = rest.slice(colon + 1);
  const dot = call.indexOf('.');
  return dot < 0 ? { sdk, service, action: call } : { sdk, service, action: call.slice(0, dot), pattern: call.slice(dot) };
}

function unwaitedWork(name: string, state: any): string | undefined {
  if (state.Type !== 'Task') return undefined;
  const call = integration(state.Resource);
  // A task token is sent back when the work is done: it waits.
  if (!call || call.pattern) return undefined;
  let what: string;
  let remedy: string;
  // lambda:invoke and its AWS SDK form aws-sdk:lambda:invoke alike (unwaited.rs).
  if (call.service === 'lambda' && call.action === 'invoke') {
    const args = state.Parameters ?? state.Arguments;
    let invocation: string | undefined;
    if (args !== undefined && (typeof args !== 'object' || args === null)) invocation = 'at run time';
    else if (args && 'InvocationType.$' in args) invocation = 'at run time';
    else if (args && typeof args.InvocationType === 'string') {
      invocation = /^\s*\{%/.test(args.InvocationType) ? 'at run time' : args.InvocationType;
    } else if (args && args.InvocationType !== undefined) invocation = 'at run time';
    if (invocation === undefined || invocation === 'RequestResponse' || invocation === 'DryRun') return undefined;
    what = invocation === 'at run time'
      ? 'a Lambda invoke whose InvocationType is chosen at run time (InvocationType.$, or a JSONata expression), which may '
        + 'be Event: the function runs on after its state ended'
      : `an asynchronous Lambda invoke (InvocationType ${invocation}), whose state ends once the function is queued, while it runs on`;
    remedy = INVOKE_REMEDY;
  } else if (!call.sdk && SYNC_FORMS.includes(`${call.service}:${call.action}`)) {
    what = `a Task on "${state.Resource}", which starts ${call.service}:${call.action} without .sync: its state ends once the work has started`;
    remedy = SYNC_REMEDY;
  } else if (call.sdk && startsWork(call.service, call.action)) {
    what = `a Task on "${state.Resource}", an AWS SDK action that starts work and returns (AWS SDK integrations have no .sync): `
      + 'its state ends once the work has started';
    remedy = SDK_REMEDY;
  } else {
    return undefined;
  }
  return `state "${name}" is ${what}: when your states then succeed, the lock would be released while that work runs on; ${remedy}`;
}

/** Whether an AWS SDK action is named like one that starts work. */
function startsWork(service: string, action: string): boolean {
  if (service === 'sfn' && action === 'startSyncExecution') return false;
  return action.startsWith('start') || action.startsWith('run') || action.startsWith('submit')
    || (action.startsWith('create') && action.endsWith('Job')) || action.endsWith('Async');
}

/** The colon-separated parts of an ARN; a `${...}` placeholder (a CDK token
 * such as ${Token[AWS.Partition.8]}) is one opaque piece (shape.rs). */
function arnParts(arn: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let at = 0;
  while (at < arn.length) {
    if (arn.startsWith('${', at)) {
      const close = arn.indexOf('}', at);
      if (close >= 0) { at = close + 1; continue; }
    }
    if (arn[at] === ':') { parts.push(arn.slice(start, at)); start = at + 1; }
    at += 1;
  }
  parts.push(arn.slice(start));
  return parts;
}

function isPartition(part: string): boolean {
  const placeholder = part.startsWith('${') && part.endsWith('}') && part.split('}').length === 2;
  const named = part.split('-').every((piece, i) => (i === 0 ? piece === 'aws' : /^[a-z0-9]+$/.test(piece)));
  return placeholder || named;
}
