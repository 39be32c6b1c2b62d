// What a review of lib/check/ found it let through, each a failing test
// first: retries left out of the chain's bound; the AWS SDK form of an
// asynchronous Lambda invoke; a catch-all after re-raises on a Task that is
// not a Lambda invoke; a "re-raise" that loops; a lockName from a context
// field other than the execution's input.
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { AroundOptions, SfnLock } from '../lib';
import { WORKLOAD_MAY_RUN_ON } from '../lib/errors';
import { codeDirectory, emptyStack } from './helpers';

function synth(build: (stack: Stack) => sfn.IChainable, options: Partial<AroundOptions> = {}): Template {
  const stack = emptyStack();
  const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory() });
  const chain = lock.around(build(stack), { lockName: 'nightly', workloadTimeout: Duration.minutes(10), ...options });
  lock.register(new sfn.StateMachine(stack, 'Locked', { definitionBody: sfn.DefinitionBody.fromChainable(chain) }));
  return Template.fromStack(stack);
}

const invoke = (stack: Stack, id: string, minutes: number) => new tasks.LambdaInvoke(stack, id, {
  lambdaFunction: new lambda.Function(stack, `${id}Fn`, {
    runtime: lambda.Runtime.PYTHON_3_13, handler: 'index.handler', code: lambda.Code.fromInline('def handler(e, c):\n    return e\n'),
  }),
  taskTimeout: sfn.Timeout.duration(Duration.minutes(minutes)), retryOnServiceExceptions: false,
});

test('review: a retried Task counts each attempt in the chain bound; a short throttle retry counts nothing', () => {
  // 2 x 6 min against 10: the second attempt would run past the lease.
  assert.throws(() => synth((s) => invoke(s, 'Call', 6).addRetry({ errors: ['MyError'], maxAttempts: 1 })), /the chain can run 7\d\d s/);
  synth((s) => invoke(s, 'Call', 6).addRetry({ errors: ['Lambda.TooManyRequestsException'], maxAttempts: 3 }));
});

test('review: an AWS SDK Lambda invoke with InvocationType Event is refused', () => {
  assert.throws(() => synth((s) => new tasks.CallAwsService(s, 'SdkFire', {
    service: 'lambda', action: 'invoke', iamResources: ['*'], taskTimeout: sfn.Timeout.duration(Duration.minutes(1)),
    parameters: { FunctionName: 'f', InvocationType: 'Event' },
  })), /state "SdkFire" is an asynchronous Lambda invoke/);
});

test('review: a catch-all after re-raises passes only on a Lambda invoke', () => {
  const http = (s: Stack) => new sfn.CustomState(s, 'Http', { stateJson: { Type: 'Task', Resource: 'arn:aws:states:::http:invoke', TimeoutSeconds: 60 } });
  const reraise = (s: Stack) => new sfn.Fail(s, 'Raise', { errorPath: '$.Error' });
  assert.throws(() => synth((s) => http(s)
    .addCatch(reraise(s), { errors: WORKLOAD_MAY_RUN_ON })
    .addCatch(new sfn.Pass(s, 'Ignore'), { errors: ['States.ALL'] })), /state "Http" has a Catch on States\.ALL/);
});

test('review: a catcher into a loop of Passes and Choices does not count as a re-raise', () => {
  assert.throws(() => synth((s) => {
    const a = new sfn.Pass(s, 'A');
    const b = new sfn.Pass(s, 'B');
    a.next(b);
    b.next(a);
    return invoke(s, 'Call', 1).addCatch(a, { errors: ['States.Timeout'] });
  }), /state "Call" has a Catch on States\.Timeout/);
});

test("review: a lockName from a context field other than the execution's input is refused", () => {
  assert.throws(() => synth((s) => new sfn.Pass(s, 'P'), { lockName: sfn.JsonPath.stringAt('$$.State.Name') }), /lockName is the JsonPath "\$\$\.State\.Name"/);
  synth((s) => new sfn.Pass(s, 'P'), { lockName: sfn.JsonPath.stringAt('$$.Execution.Input.customerId') });
});
