// What around() refuses in a chain (lib/check/): the rules of `sfn-lock
// wrap` (crates/sfn-lock-cli/src/wrap/mod.rs), each refusal naming the state
// and what to do; and what it must not refuse: the sample workload, the
// example app, a plain chain.
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { AroundOptions, SfnLock } from '../lib';
import { codeDirectory, emptyStack, example } from './helpers';

/** A registered state machine with the lock around `build`'s chain,
 * synthesized (validations run). */
function synth(build: (stack: Stack, lock: SfnLock) => sfn.IChainable, options: Partial<AroundOptions> = {}): Template {
  const stack = emptyStack();
  const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory() });
  const chain = lock.around(build(stack, lock), { lockName: 'nightly', workloadTimeout: Duration.minutes(10), ...options });
  const machine = new sfn.StateMachine(stack, 'Locked', {
    definitionBody: sfn.DefinitionBody.fromChainable(chain), queryLanguage: options.queryLanguage,
  });
  lock.register(machine);
  return Template.fromStack(stack);
}

const fn = (stack: Stack) => (stack.node.tryFindChild('Fn') as lambda.Function | undefined) ?? new lambda.Function(stack, 'Fn', {
  runtime: lambda.Runtime.PYTHON_3_13, handler: 'index.handler', code: lambda.Code.fromInline('def handler(e, c):\n    return e\n'),
});
const minute = sfn.Timeout.duration(Duration.minutes(1));
/** A plain synchronous Lambda invoke, bounded, without CDK's default Retry. */
const invoke = (stack: Stack, id = 'Call', props: Partial<tasks.LambdaInvokeProps> = {}) => new tasks.LambdaInvoke(stack, id, {
  lambdaFunction: fn(stack), taskTimeout: minute, retryOnServiceExceptions: false, ...props,
});
/** A Task on `resource`, given as JSON. */
const task = (stack: Stack, id: string, resource: string, extra: Record<string, unknown> = {}) =>
  new sfn.CustomState(stack, id, { stateJson: { Type: 'Task', Resource: resource, TimeoutSeconds: 60, ...extra } });

// --- H1: Retry and Catch on an error after which work may still run.

test("refused: CDK's LambdaInvoke with its default Retry on the Lambda service errors, saying retryOnServiceExceptions: false", () => {
  assert.throws(() => synth((s) => new tasks.LambdaInvoke(s, 'Call', { lambdaFunction: fn(s), taskTimeout: minute })),
    /state "Call" has a Retry on Lambda\.ClientExecutionTimeoutException, .*set retryOnServiceExceptions: false/);
});

test('refused: a Retry or Catch on States.Timeout, a Lambda service error or a catch-all, at any depth', () => {
  assert.throws(() => synth((s) => invoke(s).addRetry({ errors: ['States.Timeout'] })), /state "Call" has a Retry on States\.Timeout, after which its work may still be running/);
  assert.throws(() => synth((s) => invoke(s).addCatch(new sfn.Pass(s, 'Handled'), { errors: ['Lambda.ServiceException'] })),
    /state "Call" has a Catch on Lambda\.ServiceException.*remove it and let the lock's own states/);
  assert.throws(() => synth((s) => invoke(s).addCatch(new sfn.Pass(s, 'Handled'))), /state "Call" has a Catch on States\.ALL, which includes States\.Timeout/);
  assert.throws(() => synth((s) => task(s, 'Put', 'arn:aws:states:::dynamodb:putItem').addRetry({ errors: ['States.TaskFailed'] })),
    /state "Put" has a Retry on States\.TaskFailed/);
  // In a Parallel branch of the user's.
  assert.throws(() => synth((s) => new sfn.Parallel(s, 'Both').branch(invoke(s).addCatch(new sfn.Pass(s, 'Handled'), { errors: ['States.HeartbeatTimeout'] }))),
    /state "Call" has a Catch on States\.HeartbeatTimeout/);
});

test('refused: any Retry or Catch on a Map, a Parallel, or a Task that waits for work (.sync, callback, activity)', () => {
  assert.throws(() => synth((s) => new sfn.Parallel(s, 'Both').branch(new sfn.Pass(s, 'A')).addRetry({ errors: ['MyError'] })),
    /state "Both" has a Retry on MyError: on a Map or Parallel/);
  assert.throws(() => synth((s) => new sfn.Map(s, 'Each').itemProcessor(new sfn.Pass(s, 'A')).addCatch(new sfn.Pass(s, 'Handled'), { errors: ['MyError'] })),
    /state "Each" has a Catch on MyError: on a Map or Parallel/);
  assert.throws(() => synth((s) => task(s, 'Child', 'arn:aws:states:::states:startExecution.sync:2').addRetry({ errors: ['MyError'] })),
    /state "Child" has a Retry on MyError: it waits for a job \(\.sync\)/);
  assert.throws(() => synth((s) => task(s, 'Callback', 'arn:aws:states:::lambda:invoke.waitForTaskToken').addCatch(new sfn.Pass(s, 'Handled'), { errors: ['MyError'] })),
    /state "Callback" has a Catch on MyError: it waits for a callback/);
  assert.throws(() => synth((s) => new tasks.StepFunctionsInvokeActivity(s, 'Worker', {
    activity: new sfn.Activity(s, 'Activity'), taskTimeout: minute,
  }).addRetry({ errors: ['MyError'] })), /state "Worker" has a Retry on MyError: it waits for an activity's worker/);
});

test('passes: a retrier with MaxAttempts 0, a throttle retry, a Catch that only re-raises, errors of your own', () => {
  synth((s) => invoke(s)
    .addRetry({ errors: ['States.ALL'], maxAttempts: 0 })
    .addRetry({ errors: ['Lambda.TooManyRequestsException'] })
    .addCatch(new sfn.Pass(s, 'Mine'), { errors: ['MyError'] }));
  // Re-raise the errors that may leave it running, handle the rest: the sample's shape.
  synth((s) => invoke(s)
    .addCatch(new sfn.Pass(s, 'Note').next(new sfn.Fail(s, 'Raise', { errorPath: '$.Error' })), { errors: ['States.Timeout', 'States.HeartbeatTimeout', 'Lambda.ClientExecutionTimeoutException', 'Lambda.SdkClientException', 'Lambda.ServiceException', 'Lambda.AWSLambdaException'] })
    .addCatch(new sfn.Pass(s, 'Ended'), { errors: ['States.ALL'] }));
});

// --- H2: a Map that tolerates failed items; a Task that does not wait for its work.

test('refused: a Map that tolerates failed items', () => {
  const map = (s: Stack, props: sfn.DistributedMapProps) => new sfn.DistributedMap(s, 'Items', props).itemProcessor(new sfn.Pass(s, 'A'));
  assert.throws(() => synth((s) => map(s, { toleratedFailureCount: 1 })), /state "Items" has ToleratedFailureCount 1: .*set it to 0/);
  assert.throws(() => synth((s) => map(s, { toleratedFailurePercentage: 5 })), /state "Items" has ToleratedFailurePercentage 5/);
  assert.throws(() => synth((s) => map(s, { toleratedFailureCountPath: '$.tolerated' })), /state "Items" has ToleratedFailureCountPath "\$\.tolerated", which may be above 0/);
  synth((s) => map(s, { toleratedFailureCount: 0 }));
});

test('refused: a Task that starts work it does not wait for', () => {
  assert.throws(() => synth((s) => invoke(s, 'Fire', { invocationType: tasks.LambdaInvocationType.EVENT })),
    /state "Fire" is an asynchronous Lambda invoke \(InvocationType Event\).*invoke it synchronously/);
  assert.throws(() => synth((s) => task(s, 'Start', 'arn:aws:states:::states:startExecution')),
    /state "Start" is a Task on .*which starts states:startExecution without \.sync.*use its \.sync form/);
  assert.throws(() => synth((s) => new tasks.CallAwsService(s, 'Sdk', {
    service: 'sfn', action: 'startExecution', iamResources: ['*'], parameters: { StateMachineArn: 'arn' }, taskTimeout: minute,
  })), /state "Sdk" is a Task on .*aws-sdk:sfn:startExecution", an AWS SDK action that starts work/);
  assert.throws(() => synth((s) => task(s, 'Chosen', 'arn:aws:states:::lambda:invoke', { Parameters: { FunctionName: 'f', 'InvocationType.$': '$.how' } })),
    /state "Chosen" is a Lambda invoke whose InvocationType is chosen at run time/);
});

// --- H3: around() only at the top level of its state machine.

test('refused: around() inside a Map, a Parallel branch, or another around()', () => {
  /** A registered state machine whose definition `build` makes of a locked chain. */
  const machine = (build: (s: Stack, locked: sfn.Chain) => sfn.IChainable) => {
    const stack = emptyStack();
    const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory() });
    const locked = lock.around(new sfn.Pass(stack, 'Work'), { lockName: 'inner', workloadTimeout: Duration.minutes(1), prefix: 'Inner ' });
    lock.register(new sfn.StateMachine(stack, 'Locked', { definitionBody: sfn.DefinitionBody.fromChainable(build(stack, locked)) }));
    return Template.fromStack(stack);
  };
  assert.throws(() => machine((s, locked) => new sfn.Map(s, 'Each').itemProcessor(locked)),
    /the lock's states \("Inner Acquire Lock", \.\.\.\) are inside a Map's item processor or a Parallel's branch.*top level of the state machine/);
  assert.throws(() => machine((s, locked) => new sfn.DistributedMap(s, 'Items').itemProcessor(locked)), /"Inner Acquire Lock", \.\.\.\) are inside/);
  assert.throws(() => machine((s, locked) => new sfn.Parallel(s, 'Both').branch(locked)), /"Inner Acquire Lock", \.\.\.\) are inside/);
  // At the top level, after a state of its own: passes.
  machine((s, locked) => new sfn.Pass(s, 'First').next(locked));
  assert.throws(() => synth((s, lock) => lock.around(new sfn.Pass(s, 'Work'), { lockName: 'inner', workloadTimeout: Duration.minutes(1), prefix: 'Inner ' })),
    /state "Inner Run Workload Under Lock" is the lock's branch of another around\(\)/);
});

// --- H4/M1: the lease must cover the chain.

test('refused: a Task without a timeout or one over workloadTimeout, a Wait over it or chosen at run time, a Distributed Map of Express children', () => {
  assert.throws(() => synth((s) => new tasks.LambdaInvoke(s, 'Call', { lambdaFunction: fn(s), retryOnServiceExceptions: false })),
    /state "Call" is a Task without TimeoutSeconds.*within workloadTimeout \(600 s\)/);
  assert.throws(() => synth((s) => invoke(s, 'Call', { taskTimeout: sfn.Timeout.duration(Duration.minutes(11)) })),
    /state "Call" has TimeoutSeconds 660, longer than workloadTimeout \(600 s\)/);
  assert.throws(() => synth((s) => invoke(s, 'Call', { taskTimeout: sfn.Timeout.at('$.timeout') })), /state "Call" has its timeout chosen at run time/);
  assert.throws(() => synth((s) => new sfn.Wait(s, 'Pause', { time: sfn.WaitTime.duration(Duration.minutes(11)) })),
    /state "Pause" waits 660 s, longer than workloadTimeout/);
  assert.throws(() => synth((s) => new sfn.Wait(s, 'Until', { time: sfn.WaitTime.timestampPath('$.at') })),
    /state "Until" waits for TimestampPath "\$\.at", which is known only at run time/);
  assert.throws(() => synth((s) => new sfn.DistributedMap(s, 'Items', { mapExecutionType: sfn.StateMachineType.EXPRESS }).itemProcessor(new sfn.Pass(s, 'A'))),
    /state "Items" is a Distributed Map whose child executions are EXPRESS.*sfn\.StateMachineType\.STANDARD/);
  // Within the bound: passes; nested ones are checked too.
  synth((s) => new sfn.Wait(s, 'Pause', { time: sfn.WaitTime.duration(Duration.minutes(9)) }).next(invoke(s)));
  assert.throws(() => synth((s) => new sfn.Map(s, 'Each').itemProcessor(task(s, 'Slow', 'arn:aws:states:::dynamodb:putItem', { TimeoutSeconds: 601 }))),
    /state "Slow" has TimeoutSeconds 601/);
});

test("refused: a chain whose longest path of timeouts passes workloadTimeout; a Parallel counts its longest branch, a Map or a loop is not bounded", () => {
  const six = sfn.Timeout.duration(Duration.minutes(6));
  assert.throws(() => synth((s) => invoke(s, 'Extract', { taskTimeout: six }).next(new sfn.Wait(s, 'Pause', { time: sfn.WaitTime.duration(Duration.minutes(1)) }))
    .next(invoke(s, 'Load', { taskTimeout: six }))),
  /the chain can run 780 s \(Extract -> Pause -> Load: .*longer than workloadTimeout \(600 s\)/);
  // A Choice's longest target, a Catch's target after the state's own timeout.
  assert.throws(() => synth((s) => new sfn.Choice(s, 'Which').when(sfn.Condition.isPresent('$.a'), new sfn.Pass(s, 'Short'))
    .otherwise(invoke(s, 'First', { taskTimeout: six }).addCatch(invoke(s, 'Cleanup', { taskTimeout: six }), { errors: ['MyError'] }))),
  /the chain can run 720 s \(Which -> First -> Cleanup/);
  synth((s) => new sfn.Parallel(s, 'Both').branch(invoke(s, 'A', { taskTimeout: six })).branch(invoke(s, 'B', { taskTimeout: six })));
  synth((s) => new sfn.Map(s, 'Each').itemProcessor(invoke(s, 'A', { taskTimeout: six })).next(invoke(s, 'B', { taskTimeout: six })));
  const poll = (s: Stack) => {
    const check = invoke(s, 'Check', { taskTimeout: six });
    return check.next(new sfn.Choice(s, 'Done?').when(sfn.Condition.isPresent('$.done'), new sfn.Succeed(s, 'Yes'))
      .otherwise(new sfn.Wait(s, 'Again', { time: sfn.WaitTime.duration(Duration.minutes(1)) }).next(check)));
  };
  synth(poll);
});

// --- the lock's variables, its name, the query languages.

test("refused: a variable named sfnLock*, a lockName that reads the input, mixed query languages", () => {
  assert.throws(() => synth((s) => new sfn.Pass(s, 'Keep', { assign: { sfnLockCopy: 1 } })), /state "Keep" assigns the variable \$sfnLockCopy/);
  assert.throws(() => synth((s) => new sfn.Pass(s, 'A'), { lockName: sfn.JsonPath.stringAt('$.customerId') }),
    /lockName is the JsonPath "\$\.customerId", which reads the state's input.*\$\$\.Execution\.Input\.customerId/);
  assert.throws(() => synth((s) => new sfn.Pass(s, 'A'), { lockName: sfn.JsonPath.format('c-{}', sfn.JsonPath.stringAt('$.id')) }), /which reads the state's input/);
  synth((s) => new sfn.Pass(s, 'A'), { lockName: sfn.JsonPath.format('c-{}', sfn.JsonPath.stringAt('$$.Execution.Input.id')) });
  const jsonata = { queryLanguage: sfn.QueryLanguage.JSONATA };
  assert.throws(() => synth((s) => sfn.Pass.jsonata(s, 'A'), { ...jsonata, lockName: sfn.JsonPath.stringAt('$$.Execution.Input.id') }),
    /lockName is the JsonPath "\$\$\.Execution\.Input\.id" but queryLanguage is JSONATA/);
  assert.throws(() => synth((s) => sfn.Pass.jsonata(s, 'A'), { ...jsonata, lockName: '{% $states.input.id %}' }), /reads the state's input or result/);
  assert.throws(() => synth((s) => new sfn.Pass(s, 'A'), { lockName: '{% $states.context.Execution.Input.id %}' }),
    /is a JSONata expression but queryLanguage is JSONPath/);
  synth((s) => sfn.Pass.jsonata(s, 'A'), { ...jsonata, lockName: '{% $states.context.Execution.Input.id %}' });
});

// --- no false refusal.

test('passes: a plain chain of Pass, Choice, Succeed and Fail', () => {
  synth((s) => new sfn.Pass(s, 'Prepare').next(new sfn.Choice(s, 'Which')
    .when(sfn.Condition.isPresent('$.bad'), new sfn.Fail(s, 'Bad', { error: 'Bad' }))
    .otherwise(new sfn.Succeed(s, 'Done'))));
});

test('passes: lambdaWorkload in both query languages, and the example app in each mode', () => {
  synth((s, lock) => lock.lambdaWorkload(s, fn(s), { timeout: Duration.minutes(10) }));
  synth((s, lock) => lock.lambdaWorkload(s, fn(s), { timeout: Duration.minutes(10), queryLanguage: sfn.QueryLanguage.JSONATA }),
    { queryLanguage: sfn.QueryLanguage.JSONATA });
  for (const onContention of ['wait', 'queue', 'skip'] as const) {
    example({ onContention });
    example({ onContention, queryLanguage: sfn.QueryLanguage.JSONATA });
  }
});
