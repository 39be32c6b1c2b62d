// around() with queryLanguage JSONATA: the states of
// statemachine/jsonata/*.asl.json, the JSONata twins of the shipped JSONPath
// definitions (the same states, Retry, Catch and targets; data through
// Arguments, Output and Assign). The lock lands in the variable $sfnLock;
// passLockToWorkload merges it into the branch's input, as the files do.
// test/equivalence.test.ts compares with those files.
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { AroundOptions, invoke, LockCalls, queueWaitTimeoutCause, Resolved, retryTransient, retryWhileHeld } from './around';
import { ACQUIRE_CAUGHT, QUEUED_ACQUIRE_CAUGHT } from './errors';

const keepInput = '{% $states.input %}';
const owner = '{% $states.context.Execution.Id %}';

/** A Task given as JSON whose Catch renders JSONata's Output: CDK's
 * CustomState renders its catchers as JSONPath ones whatever the machine's
 * query language, which would drop each catcher's Output. */
class JsonataTask extends sfn.CustomState {
  toStateJson(queryLanguage?: sfn.QueryLanguage): object {
    return { ...super.toStateJson(queryLanguage), ...this.renderRetryCatch(sfn.QueryLanguage.JSONATA) };
  }
}

/** The options as buildAround resolved and checked them. */
export function buildAroundJsonata(scope: Construct, calls: LockCalls, work: sfn.IChainable, o: AroundOptions,
  { mode, p, limit, maxWait }: Resolved): sfn.Chain {
  const lockName = o.lockName;
  const lease = `{% ${o.workloadTimeout.toSeconds()} + ${calls.workloadMaxRun.toSeconds()} + ${calls.leaseMargin.toSeconds()} %}`;

  const releaseTask = (id: string, extra: Record<string, unknown> = {}) => new JsonataTask(scope, p + id, {
    stateJson: {
      Type: 'Task', Resource: invoke,
      Arguments: { FunctionName: calls.releaseArn, Payload: { lockName, owner, limit, ...extra } },
      Output: keepInput,
    },
  }).addRetry(retryTransient);
  const hasStringCause = sfn.Condition.jsonata("{% $type($states.input.Cause) = 'string' %}");

  const checkCause = sfn.Choice.jsonata(scope, p + 'Check Whether Error Has Cause')
    .when(hasStringCause, sfn.Fail.jsonata(scope, p + 'Fail With Original Error', {
      error: '{% $states.input.Error %}', cause: '{% $states.input.Cause %}',
    }))
    .otherwise(sfn.Fail.jsonata(scope, p + 'Fail With Original Error Name', { error: '{% $states.input.Error %}' }));
  const releaseAfterFailure = releaseTask('Release Lock After Failure')
    .addCatch(checkCause, { errors: ['States.ALL'], outputs: keepInput });
  releaseAfterFailure.next(checkCause);

  const waitToStop = sfn.Wait.jsonata(scope, p + 'Wait For Workload To Stop', {
    time: sfn.WaitTime.duration(calls.workloadMaxRun),
  }).next(releaseAfterFailure);
  const leave = sfn.Succeed.jsonata(scope, p + 'Succeed And Leave Lock To Cleanup');
  const release = releaseTask('Release Lock').addCatch(leave, { errors: ['States.ALL'], outputs: keepInput });
  const takeError = sfn.Pass.jsonata(scope, p + 'Take Workload Error', { outputs: '{% $states.input.sfnLockWorkloadError %}' })
    .next(releaseAfterFailure);
  const checkFailed = sfn.Choice.jsonata(scope, p + 'Check Whether Workload Failed')
    .when(sfn.Condition.jsonata("{% $type($states.input) = 'object' and $exists($states.input.sfnLockWorkloadError) %}"), takeError)
    .otherwise(release);
  // The branch's input: the execution's, with the lock merged in when asked.
  // One expression for the whole Arguments, as the files have it (ASL allows
  // it; CDK's type says object, and renders the value as given).
  const branchInput: any = "{% $sfnLockResultPath = null ? $states.input : ($type($states.input) = 'object' ? $merge([$states.input, {$substringAfter($sfnLockResultPath, '$.'): $sfnLock}]) : $error('PassLockToWorkload: the input is not a JSON object, so sfnLock cannot be added to it')) %}";
  const underLock = sfn.Parallel.jsonata(scope, p + 'Run Workload Under Lock', {
    arguments: branchInput,
    outputs: '{% $states.result[0] %}',
  }).branch(work).addCatch(waitToStop, { errors: ['States.ALL'] });
  underLock.next(checkFailed);

  const result = mode === 'queue' ? '$states.result' : '$states.result.Payload';
  const assign = {
    sfnLock: {
      lockName: `{% ${result}.lockName %}`, owner: `{% ${result}.owner %}`,
      fencingToken: `{% ${result}.fencingToken %}`, expiresAt: `{% ${result}.expiresAt %}`,
    },
    sfnLockResultPath: o.passLockToWorkload ? '$.sfnLock' : null,
  };
  const waitFields = { waitStartedAt: '{% $states.context.Execution.StartTime %}', maxWaitSeconds: maxWait };
  let acquire: JsonataTask;
  if (mode === 'queue') {
    const failWaitTimeout = sfn.Fail.jsonata(scope, p + 'Fail With Lock Wait Timeout', {
      error: 'LockWaitTimeout',
      cause: queueWaitTimeoutCause(maxWait),
    });
    const withdraw = releaseTask('Release Lock After Wait Timeout', { withdraw: true })
      .addCatch(failWaitTimeout, { errors: ['States.ALL'], outputs: keepInput });
    withdraw.next(failWaitTimeout);
    acquire = new JsonataTask(scope, p + 'Acquire Lock', {
      stateJson: {
        Type: 'Task', Resource: `${invoke}.waitForTaskToken`,
        Arguments: {
          FunctionName: calls.acquireArn,
          Payload: { lockName, owner, limit, leaseSeconds: lease, taskToken: '{% $states.context.Task.Token %}', ...waitFields },
        },
        TimeoutSeconds: Math.max(1, maxWait),
        Assign: assign, Output: keepInput,
      },
    }).addRetry(retryWhileHeld).addRetry(retryTransient)
      .addCatch(withdraw, { errors: ['States.Timeout'] })
      .addCatch(releaseAfterFailure, { errors: QUEUED_ACQUIRE_CAUGHT });
  } else {
    acquire = new JsonataTask(scope, p + 'Acquire Lock', {
      stateJson: {
        Type: 'Task', Resource: invoke,
        Arguments: {
          FunctionName: calls.acquireArn,
          Payload: { lockName, owner, limit, leaseSeconds: lease, ...(mode === 'wait' ? waitFields : {}) },
        },
        Assign: assign, Output: keepInput,
      },
    });
    if (mode === 'wait') acquire.addRetry(retryWhileHeld);
    acquire.addRetry(retryTransient).addCatch(releaseAfterFailure, { errors: ACQUIRE_CAUGHT });
  }
  acquire.addCatch(releaseAfterFailure, { errors: ['States.ResultPathMatchFailure'] });
  if (mode === 'skip') {
    const skipped = sfn.Pass.jsonata(scope, p + 'Skipped', {
      outputs: "{% {'skipped': true, 'lock': $parse($states.input.error.errorMessage)} %}",
    });
    const parse = sfn.Pass.jsonata(scope, p + 'Parse Lock Held', {
      outputs: "{% {'error': $parse($states.input.Cause)} %}",
    }).next(skipped);
    acquire.addCatch(parse, { errors: ['LockUnavailable'] });
  }
  acquire.next(underLock);
  return sfn.Chain.custom(acquire, [], release);
}
