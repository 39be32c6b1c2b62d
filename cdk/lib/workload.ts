// The shipped definitions' sample workload, for a Lambda function of the
// user's: the Task and its two catchers (statemachine/locked-workflow.asl.json,
// the Parallel's branch). Inside lock.around() it releases at once after an
// error that proves its one invocation ended, and holds the lock after one
// that may leave it running (docs/failures.md). Any other chain works inside
// around() too; its errors all take the held path.
import { Duration } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { hasStringCause } from './around';
import { WORKLOAD_MAY_RUN_ON } from './errors';

/** The only retry of the sample Task: a throttled invoke never started the function. */
const RETRY_THROTTLE: sfn.RetryProps = {
  errors: ['Lambda.TooManyRequestsException'], interval: Duration.seconds(1),
  backoffRate: 2, jitterStrategy: sfn.JitterType.FULL, maxAttempts: 3,
};

export interface LambdaWorkloadOptions {
  /** The Task's TimeoutSeconds: give around() the same workloadTimeout. */
  readonly timeout: Duration;
  /** Put before every state name (as around()'s prefix). */
  readonly prefix?: string;
  /** As around()'s. */
  readonly queryLanguage?: sfn.QueryLanguage;
}

export function lambdaWorkload(scope: Construct, fn: lambda.IFunction, o: LambdaWorkloadOptions): sfn.Chain {
  if (o.queryLanguage === sfn.QueryLanguage.JSONATA) return lambdaWorkloadJsonata(scope, fn, o);
  const p = o.prefix ?? '';
  const run = new tasks.LambdaInvoke(scope, p + 'Run Workload', {
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromJsonPathAt('$'),
    outputPath: '$.Payload',
    taskTimeout: sfn.Timeout.duration(o.timeout),
    // A Lambda service error may come after the function started: a retry
    // would run a second invocation beside the first. Only a throttle, which
    // never started it, is retried.
    retryOnServiceExceptions: false,
  });
  run.addRetry(RETRY_THROTTLE);
  // The invocation may still run: raise the error again, unchanged, out of
  // the branch, so that the Parallel's Catch holds the lock.
  const raise = new sfn.Choice(scope, p + 'Check Workload Error Cause')
    .when(hasStringCause(), new sfn.Fail(scope, p + 'Raise Workload Error Again', { errorPath: '$.Error', causePath: '$.Cause' }))
    .otherwise(new sfn.Fail(scope, p + 'Raise Workload Error Name Again', { errorPath: '$.Error' }));
  // Every other error proves the invocation ended: end the branch with a
  // marker that around()'s Check Whether Workload Failed releases at once on.
  const ended = new sfn.Pass(scope, p + 'Workload Ended With Error', {
    parameters: { sfnLockWorkloadError: sfn.JsonPath.entirePayload },
  });
  run.addCatch(raise, { errors: WORKLOAD_MAY_RUN_ON });
  run.addCatch(ended, { errors: ['States.ALL'] });
  // The marker ends the branch: a state chained after the workload (.next)
  // follows a success only, never the marker of a failure.
  return sfn.Chain.custom(run, [run], run);
}

/** The same in JSONata (statemachine/jsonata/locked-workflow.asl.json's branch). */
function lambdaWorkloadJsonata(scope: Construct, fn: lambda.IFunction, o: LambdaWorkloadOptions): sfn.Chain {
  const p = o.prefix ?? '';
  const run = tasks.LambdaInvoke.jsonata(scope, p + 'Run Workload', {
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromText('{% $states.input %}'),
    outputs: '{% $states.result.Payload %}',
    taskTimeout: sfn.Timeout.duration(o.timeout),
    retryOnServiceExceptions: false,
  });
  run.addRetry(RETRY_THROTTLE);
  const raise = sfn.Choice.jsonata(scope, p + 'Check Workload Error Cause')
    .when(sfn.Condition.jsonata("{% $type($states.input.Cause) = 'string' %}"),
      sfn.Fail.jsonata(scope, p + 'Raise Workload Error Again', { error: '{% $states.input.Error %}', cause: '{% $states.input.Cause %}' }))
    .otherwise(sfn.Fail.jsonata(scope, p + 'Raise Workload Error Name Again', { error: '{% $states.input.Error %}' }));
  const ended = sfn.Pass.jsonata(scope, p + 'Workload Ended With Error', {
    outputs: "{% {'sfnLockWorkloadError': $states.input} %}",
  });
  run.addCatch(raise, { errors: WORKLOAD_MAY_RUN_ON });
  run.addCatch(ended, { errors: ['States.ALL'] });
  // The marker ends the branch: a state chained after the workload (.next)
  // follows a success only, never the marker of a failure.
  return sfn.Chain.custom(run, [run], run);
}
