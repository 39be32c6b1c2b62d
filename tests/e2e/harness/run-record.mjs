// What an execution did, for tests to observe instead of sleeping: RunRecord collects
// what its handlers and the interpreter's event log saw as it runs (and wakes whoever
// waits for something to show up in it), outcomeOf how it ended.

import { ExecutionAbortedError, ExecutionError, ExecutionTimeoutError } from 'aws-local-stepfunctions';

/** What one execution's handlers and event log have seen so far. */
export class RunRecord {
  constructor(executionArn) {
    this.executionArn = executionArn;
    this.acquireAttempts = []; // {payload, result} or {payload, error, cause}
    this.releases = []; // {state, payload, startedAt, result} or {state, payload, startedAt, error, cause}
    this.lease = undefined; // the last successful acquire-lock answer
    this.workloadCalls = []; // {payload, enteredAt, exitedAt, fencingToken}
    this.childRuns = []; // {executionArn, input, status, endedAt}
    this.stops = []; // StopExecution calls: {executionArn, found, statusBefore, at} or {executionArn, error, at}
    this.describes = []; // DescribeExecution calls: {executionArn, status, at}
    // One per callback (.waitForTaskToken) task attempt: {state, taskToken, mintedAt, answer
    // (what acquire-lock returned), status (OPEN until the token ends), wokenAt (when the task
    // learned its token ended, performance.now()), output | error, cause}.
    this.callbacks = [];
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

/** Settles an execution into the shape DescribeExecution would report. */
export async function outcomeOf(result) {
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
