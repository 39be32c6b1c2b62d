// lock.around(chain): the states of statemachine/locked-workflow.asl.json
// (onContention 'wait'), queued-workflow.asl.json ('queue') and
// skip-if-running.asl.json ('skip') around a chain of the user's, built with
// CDK's state classes. The shipped files are the specification: their
// comments say why each Retry, Catch and timeout is there, and
// test/equivalence.test.ts fails when these states drift from them.
import { Aws, Duration, Token } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { buildAroundJsonata } from './around-jsonata';
import { checkAround } from './check';
import { ACQUIRE_CAUGHT, QUEUED_ACQUIRE_CAUGHT, TRANSIENT } from './errors';

export type OnContention = 'wait' | 'queue' | 'skip';

export interface AroundOptions {
  /** The lock's name: a literal, or a path for a lock per key, such as
   * sfn.JsonPath.stringAt('$$.Execution.Input.customerId') (the context
   * object: the release states do not see the original input). */
  readonly lockName: string;
  /** Holders at once: 1 (default) a mutex, 2 to 1000 a semaphore. */
  readonly limit?: number;
  /** 'wait' (default): poll with capped, jittered retries until maxWait;
   * 'queue': wait first in, first out on a task token (DynamoDB store);
   * 'skip': succeed at once with {skipped: true, lock} while held. */
  readonly onContention?: OnContention;
  /** Longest wait for a held lock before LockWaitTimeout. Default 1 hour.
   * Ignored by 'skip'; 'queue' takes it as the acquire's TimeoutSeconds
   * (at least 1 s, which ASL requires). */
  readonly maxWait?: Duration;
  /** The bound of the whole chain: it must end within this (a Task's
   * TimeoutSeconds for each of its states). The lease is this plus the
   * lock's workloadMaxRun plus its leaseMargin. */
  readonly workloadTimeout: Duration;
  /** Add sfnLock = {lockName, owner, fencingToken, expiresAt} to the chain's
   * input (which must then be an object). Default false: transparent. */
  readonly passLockToWorkload?: boolean;
  /** Put before every state name, so that two locked chains fit in one
   * state machine. Default '' (the shipped names). */
  readonly prefix?: string;
  /** JSONATA: the states of statemachine/jsonata/ (give the state machine
   * the same queryLanguage; lockName then a literal or a '{% ... %}'
   * expression). Default JSONPath, CDK's default. */
  readonly queryLanguage?: sfn.QueryLanguage;
}

/** What around() needs of the SfnLock: the published versions the states call
 * and the two bounds every lease includes. */
export interface LockCalls {
  readonly acquireArn: string;
  readonly releaseArn: string;
  readonly workloadMaxRun: Duration;
  readonly leaseMargin: Duration;
}

// The shipped retriers, as CDK retry props.
export const retryTransient: sfn.RetryProps = {
  errors: TRANSIENT, interval: Duration.seconds(1), backoffRate: 2,
  maxDelay: Duration.seconds(20), jitterStrategy: sfn.JitterType.FULL, maxAttempts: 6,
};
export const retryWhileHeld: sfn.RetryProps = {
  errors: ['LockUnavailable'], interval: Duration.seconds(1), backoffRate: 2,
  maxDelay: Duration.seconds(10), jitterStrategy: sfn.JitterType.FULL, maxAttempts: 99999999,
};

export const invoke = `arn:${Aws.PARTITION}:states:::lambda:invoke`;

/** The Fail cause of a queue wait that ran out (both query languages). */
export const queueWaitTimeoutCause = (maxWait: number) =>
  `Waited MaxWaitSeconds (${maxWait} s) in the lock's queue without being admitted; left the queue, released anything handed over as the wait ran out, and ran nothing.`;

/** around()'s options with their defaults, checked: worked out once for
 * both query languages. */
export interface Resolved { mode: OnContention; p: string; limit: number; maxWait: number }

export function buildAround(scope: Construct, calls: LockCalls, work: sfn.IChainable, o: AroundOptions): sfn.Chain {
  const mode = o.onContention ?? 'wait';
  const p = o.prefix ?? '';
  const limit = o.limit ?? 1;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new Error(`around: limit must be an integer from 1 to 1000, got ${limit}`);
  }
  const maxWait = (o.maxWait ?? Duration.hours(1)).toSeconds();
  if (maxWait > 36000) {
    // Each retry of a wait adds history events; an execution may have 25,000.
    throw new Error(`around: maxWait must be at most 10 hours, got ${maxWait} s`);
  }
  // The branch: what `sfn-lock wrap` refuses, around() refuses (check/).
  checkAround(scope, work, o, calls);
  if (o.queryLanguage === sfn.QueryLanguage.JSONATA) return buildAroundJsonata(scope, calls, work, o, { mode, p, limit, maxWait });
  const timeout = o.workloadTimeout.toSeconds();
  const maxRun = calls.workloadMaxRun.toSeconds();
  const margin = calls.leaseMargin.toSeconds();
  // Nested MathAdd of the same three numbers as the shipped definitions, so
  // that the lease reads as the sum of the bounds it covers. FieldUtils turns
  // each JsonPath token (the owner, a per-key lockName) into a "key.$" field.
  const lease = sfn.JsonPath.mathAdd(Token.asNumber(sfn.JsonPath.mathAdd(timeout, maxRun)), margin);
  const lockFields = (extra: Record<string, unknown> = {}) => sfn.FieldUtils.renderObject({
    lockName: o.lockName, owner: sfn.JsonPath.executionId, limit, ...extra,
  });

  const releaseTask = (id: string, extra: Record<string, unknown> = {}) => new sfn.CustomState(scope, p + id, {
    stateJson: {
      Type: 'Task', Resource: invoke,
      Parameters: {
        FunctionName: calls.releaseArn,
        Payload: lockFields(extra),
      },
      ResultPath: null,
    },
  }).addRetry(retryTransient);

  // --- the failure path: release, then fail with the original error.
  const failWithError = new sfn.Fail(scope, p + 'Fail With Original Error', { errorPath: '$.Error', causePath: '$.Cause' });
  const failWithName = new sfn.Fail(scope, p + 'Fail With Original Error Name', { errorPath: '$.Error' });
  const checkCause = new sfn.Choice(scope, p + 'Check Whether Error Has Cause')
    .when(hasStringCause(), failWithError)
    .otherwise(failWithName);
  const releaseAfterFailure = releaseTask('Release Lock After Failure')
    .addCatch(checkCause, { errors: ['States.ALL'], resultPath: sfn.JsonPath.DISCARD });
  releaseAfterFailure.next(checkCause);

  // --- the held path: every error out of the branch may leave work running.
  const waitToStop = new sfn.Wait(scope, p + 'Wait For Workload To Stop', {
    time: sfn.WaitTime.duration(calls.workloadMaxRun),
  }).next(releaseAfterFailure);

  // --- the success path: a release that keeps failing leaves the lock to the sweep.
  const leave = new sfn.Succeed(scope, p + 'Succeed And Leave Lock To Cleanup');
  const release = releaseTask('Release Lock')
    .addCatch(leave, { errors: ['States.ALL'], resultPath: sfn.JsonPath.DISCARD });

  const takeError = new sfn.Pass(scope, p + 'Take Workload Error', { inputPath: '$.sfnLockWorkloadError' })
    .next(releaseAfterFailure);
  const checkFailed = new sfn.Choice(scope, p + 'Check Whether Workload Failed')
    .when(sfn.Condition.isPresent('$.sfnLockWorkloadError'), takeError)
    .otherwise(release);

  // One branch, so that one Catch covers every state of the user's chain.
  const underLock = new sfn.Parallel(scope, p + 'Run Workload Under Lock', { outputPath: '$[0]' })
    .branch(work)
    .addCatch(waitToStop, { errors: ['States.ALL'] });
  underLock.next(checkFailed);

  // --- the acquire, one of three flavours.
  const resultSelector = (at: string) => ({
    'lockName.$': `${at}.lockName`, 'owner.$': `${at}.owner`,
    'fencingToken.$': `${at}.fencingToken`, 'expiresAt.$': `${at}.expiresAt`,
  });
  const resultPath = o.passLockToWorkload ? '$.sfnLock' : null;
  let acquire: sfn.CustomState;
  if (mode === 'queue') {
    const failWaitTimeout = new sfn.Fail(scope, p + 'Fail With Lock Wait Timeout', {
      error: 'LockWaitTimeout',
      cause: queueWaitTimeoutCause(maxWait),
    });
    // Leaves the queue; a grant handed over as the wait ran out goes too.
    const withdraw = releaseTask('Release Lock After Wait Timeout', { withdraw: true })
      .addCatch(failWaitTimeout, { errors: ['States.ALL'], resultPath: sfn.JsonPath.DISCARD });
    withdraw.next(failWaitTimeout);
    acquire = new sfn.CustomState(scope, p + 'Acquire Lock', {
      stateJson: {
        Type: 'Task', Resource: `${invoke}.waitForTaskToken`,
        Parameters: {
          FunctionName: calls.acquireArn,
          Payload: lockFields({
            leaseSeconds: lease, taskToken: sfn.JsonPath.taskToken,
            waitStartedAt: sfn.JsonPath.stringAt('$$.Execution.StartTime'), maxWaitSeconds: maxWait,
          }),
        },
        TimeoutSeconds: Math.max(1, maxWait),
        ResultSelector: resultSelector('$'), ResultPath: resultPath,
      },
    }).addRetry(retryWhileHeld).addRetry(retryTransient)
      .addCatch(withdraw, { errors: ['States.Timeout'] })
      .addCatch(releaseAfterFailure, { errors: QUEUED_ACQUIRE_CAUGHT });
  } else {
    const waits = mode === 'wait'
      ? { waitStartedAt: sfn.JsonPath.stringAt('$$.Execution.StartTime'), maxWaitSeconds: maxWait } : {};
    acquire = new sfn.CustomState(scope, p + 'Acquire Lock', {
      stateJson: {
        Type: 'Task', Resource: invoke,
        Parameters: { FunctionName: calls.acquireArn, Payload: lockFields({ leaseSeconds: lease, ...waits }) },
        ResultSelector: resultSelector('$.Payload'), ResultPath: resultPath,
      },
    });
    if (mode === 'wait') acquire.addRetry(retryWhileHeld);
    acquire.addRetry(retryTransient).addCatch(releaseAfterFailure, { errors: ACQUIRE_CAUGHT });
  }
  // A result that cannot land (passLockToWorkload on a non-object input) may
  // follow a grant: release it.
  acquire.addCatch(releaseAfterFailure, { errors: ['States.ResultPathMatchFailure'] });
  if (mode === 'skip') {
    const skipped = new sfn.Pass(scope, p + 'Skipped', {
      parameters: { skipped: true, lock: sfn.JsonPath.stringToJson(sfn.JsonPath.stringAt('$.error.errorMessage')) },
    });
    const parse = new sfn.Pass(scope, p + 'Parse Lock Held', {
      parameters: { error: sfn.JsonPath.stringToJson(sfn.JsonPath.stringAt('$.Cause')) },
    }).next(skipped);
    acquire.addCatch(parse, { errors: ['LockUnavailable'] });
  }
  acquire.next(underLock);
  // The chain's ends are the lock's own: nothing may follow a release that
  // runs on after the user's chain.
  return sfn.Chain.custom(acquire, [], release);
}

/** An error output usually, not always, carries a Cause; CausePath on a
 * missing one would turn the error into States.Runtime. */
export function hasStringCause(): sfn.Condition {
  return sfn.Condition.and(sfn.Condition.isPresent('$.Cause'), sfn.Condition.isString('$.Cause'));
}
