// The lease must cover the chain (timing.rs; wrap relies on the user's
// TimeoutSeconds): each state bounded within workloadTimeout, and the
// chain's longest path too, when it can be known.
import type { LockCalls } from '../around';
import type { States } from './states';

export function timing(name: string, state: any, workloadTimeout: number, calls: LockCalls): string | undefined {
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
      + 'Step Functions cannot stop Express executions, so after an error one may run on up to 300 s after the Map '
      + `failed, and work it started (a Lambda invocation) up to workloadMaxRun (${calls.workloadMaxRun.toSeconds()} s) `
      + "after that: longer than the lock's held wait covers (wrap adds the 300 s); use mapExecutionType: "
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
export function branchBound(start: string, states: States, workloadTimeout: number): string | undefined {
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
