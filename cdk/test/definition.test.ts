// around() on chains of the user's, and the construct's options: the
// workload's chain inside the one Parallel branch, the lock's states around
// it, the Catch paths that keep the lock, and what is refused.
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { Duration } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { SfnLock } from '../lib';
import { codeDirectory, definitionOf, emptyStack, example } from './helpers';

/** A stack with the lock around `work`, registered or not. */
const locks = new WeakMap<object, SfnLock>();
/** The lock of a stack `locked` made (for chains that need it, as lambdaWorkload). */
const lockOf = (stack: object): SfnLock => locks.get(stack) as SfnLock;

function locked(work: (stack: any) => sfn.IChainable, options: Partial<Parameters<SfnLock['around']>[1]> = {}, register = true) {
  const stack = emptyStack();
  const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory() });
  locks.set(stack, lock);
  const chain = lock.around(work(stack), { lockName: 'nightly', workloadTimeout: Duration.minutes(10), ...options });
  const machine = new sfn.StateMachine(stack, 'Locked', {
    definitionBody: sfn.DefinitionBody.fromChainable(chain), queryLanguage: options.queryLanguage,
  });
  if (register) lock.register(machine);
  return { stack, lock, template: () => Template.fromStack(stack) };
}

const twoSteps = (stack: any) => new sfn.Pass(stack, 'Prepare').next(new sfn.Pass(stack, 'Load'));

test('acquire -> the chain inside one Parallel branch -> check -> release', () => {
  const def = definitionOf(locked(twoSteps).template());
  assert.equal(def.StartAt, 'Acquire Lock');
  assert.equal(def.States['Acquire Lock'].Next, 'Run Workload Under Lock');
  const parallel = def.States['Run Workload Under Lock'];
  assert.equal(parallel.Type, 'Parallel');
  assert.equal(parallel.Branches.length, 1);
  assert.deepEqual(Object.keys(parallel.Branches[0].States), ['Prepare', 'Load']);
  assert.equal(parallel.Branches[0].StartAt, 'Prepare');
  assert.equal(parallel.Next, 'Check Whether Workload Failed');
  assert.equal(def.States['Check Whether Workload Failed'].Default, 'Release Lock');
  assert.equal(def.States['Release Lock'].End, true);
  // The user's states are in the branch only.
  assert.ok(!('Prepare' in def.States) && !('Load' in def.States));
});

test('every error out of the chain holds the lock workloadMaxRun, then releases and fails with it', () => {
  const def = definitionOf(locked(twoSteps).template());
  assert.deepEqual(def.States['Run Workload Under Lock'].Catch, [{ ErrorEquals: ['States.ALL'], Next: 'Wait For Workload To Stop' }]);
  assert.equal(def.States['Wait For Workload To Stop'].Seconds, 900);
  assert.equal(def.States['Wait For Workload To Stop'].Next, 'Release Lock After Failure');
  const after = def.States['Release Lock After Failure'];
  assert.equal(after.ResultPath, null, 'the original error stays the data');
  assert.equal(after.Next, 'Check Whether Error Has Cause');
  assert.deepEqual(after.Catch, [{ ErrorEquals: ['States.ALL'], ResultPath: null, Next: 'Check Whether Error Has Cause' }]);
  // A release that keeps failing after the work succeeded: succeed, the sweep frees it.
  assert.deepEqual(def.States['Release Lock'].Catch, [{ ErrorEquals: ['States.ALL'], ResultPath: null, Next: 'Succeed And Leave Lock To Cleanup' }]);
});

test('the lease is workloadTimeout + workloadMaxRun + leaseMargin', () => {
  const def = definitionOf(locked(twoSteps).template());
  assert.equal(def.States['Acquire Lock'].Parameters.Payload['leaseSeconds.$'], 'States.MathAdd(States.MathAdd(600, 900), 300)');
});

test('a lock per key, the lock passed to the workload, a semaphore', () => {
  const def = definitionOf(locked(twoSteps, {
    lockName: sfn.JsonPath.stringAt('$$.Execution.Input.customerId'), passLockToWorkload: true, limit: 3,
  }).template());
  for (const name of ['Acquire Lock', 'Release Lock', 'Release Lock After Failure']) {
    const payload = def.States[name].Parameters.Payload;
    assert.equal(payload['lockName.$'], '$$.Execution.Input.customerId', name);
    assert.equal(payload.limit, 3, name);
  }
  assert.equal(def.States['Acquire Lock'].ResultPath, '$.sfnLock');
});

test("'queue' with no wait still has a positive TimeoutSeconds; a timeout withdraws from the queue", () => {
  const def = definitionOf(locked(twoSteps, { onContention: 'queue', maxWait: Duration.seconds(0) }).template());
  const acquire = def.States['Acquire Lock'];
  assert.equal(acquire.TimeoutSeconds, 1);
  assert.deepEqual(acquire.Catch[0], { ErrorEquals: ['States.Timeout'], Next: 'Release Lock After Wait Timeout' });
  assert.equal(def.States['Release Lock After Wait Timeout'].Parameters.Payload.withdraw, true);
});

test('refused: a limit out of range, a wait over 10 hours, around() with no machine registered', () => {
  assert.throws(() => locked(twoSteps, { limit: 0 }), /limit must be an integer from 1 to 1000/);
  assert.throws(() => locked(twoSteps, { maxWait: Duration.hours(11) }), /maxWait must be at most 10 hours/);
  assert.throws(() => locked(twoSteps, {}, false).template(), /call lock.register\(stateMachine\)/);
  assert.throws(() => new SfnLock(emptyStack(), 'L', { codeDirectory: codeDirectory(), leaseMargin: Duration.seconds(60) }), /leaseMargin must be 180/);
  // 600 + 900 + 300 = 1800 s of lease; a cap of 1799 would refuse every acquire.
  const capped = new SfnLock(emptyStack(), 'L', { codeDirectory: codeDirectory(), maxLease: Duration.seconds(1799) });
  assert.throws(() => capped.around(new sfn.Pass(capped, 'W'), { lockName: 'x', workloadTimeout: Duration.minutes(10) }), /1800 s\) exceeds maxLease \(1799 s\)/);
});

test('alarms off: none; a topic: each alarm notifies it in ALARM and back to OK', () => {
  example({ lock: { alarms: false } }).template.resourceCountIs('AWS::CloudWatch::Alarm', 0);
  const topic = 'arn:aws:sns:eu-west-1:123456789012:ops';
  example({ lock: { alarmTopicArn: topic } }).template.allResourcesProperties('AWS::CloudWatch::Alarm', {
    AlarmActions: [topic], OKActions: [topic],
  });
});

test('two machines registered: both swept, both in the rule', () => {
  const { stack, lock } = locked(twoSteps);
  const other = lock.around(new sfn.Pass(stack, 'Other'), { lockName: 'other', workloadTimeout: Duration.minutes(1), prefix: 'Other: ' });
  lock.register(new sfn.StateMachine(stack, 'Second', { definitionBody: sfn.DefinitionBody.fromChainable(other) }));
  const template = Template.fromStack(stack);
  const rule = Object.values(template.findResources('AWS::Events::Rule'))[0] as any;
  assert.equal(rule.Properties.EventPattern.detail.stateMachineArn.length, 2);
  // Swept: the function's list names both (Fn::Join of their Refs).
  const swept = Object.values(template.findResources('AWS::Lambda::Function'))
    .map((f: any) => f.Properties?.Environment?.Variables?.SWEPT_STATE_MACHINE_ARNS)
    .find((arns) => arns !== undefined);
  const refs = JSON.stringify(swept).match(/"Ref":"[A-Za-z0-9]+"/g) ?? [];
  assert.equal(new Set(refs).size, 2, JSON.stringify(swept));
});

test('JSONata: the lock in $sfnLock, merged into the branch input only when asked; a per-key name as an expression', () => {
  const jsonata = { queryLanguage: sfn.QueryLanguage.JSONATA };
  const plain = definitionOf(locked(twoSteps, jsonata).template());
  assert.equal(plain.QueryLanguage, 'JSONata');
  assert.equal(plain.States['Acquire Lock'].Assign.sfnLockResultPath, null);
  assert.equal(plain.States['Acquire Lock'].Output, '{% $states.input %}');
  const passed = definitionOf(locked(twoSteps, {
    ...jsonata, passLockToWorkload: true, lockName: '{% $states.context.Execution.Input.customerId %}',
  }).template());
  assert.equal(passed.States['Acquire Lock'].Assign.sfnLockResultPath, '$.sfnLock');
  for (const name of ['Acquire Lock', 'Release Lock', 'Release Lock After Failure']) {
    assert.equal(passed.States[name].Arguments.Payload.lockName, '{% $states.context.Execution.Input.customerId %}', name);
  }
  assert.equal(passed.States['Acquire Lock'].Arguments.Payload.leaseSeconds, '{% 600 + 900 + 300 %}');
});

test('review: the failure marker ends the branch even with a state chained after the workload', () => {
  for (const queryLanguage of [undefined, sfn.QueryLanguage.JSONATA]) {
    const { lock, template } = locked((stack) => {
      const fn = new lambda.Function(stack, 'Fn', { runtime: lambda.Runtime.PYTHON_3_13, handler: 'i.h', code: lambda.Code.fromInline('x'), timeout: Duration.seconds(60) });
      return lockOf(stack).lambdaWorkload(stack, fn, { timeout: Duration.seconds(60), queryLanguage }).next(new sfn.Pass(stack, 'Step2'));
    }, { queryLanguage });
    void lock;
    const branch = definitionOf(template()).States['Run Workload Under Lock'].Branches[0].States;
    assert.equal(branch['Workload Ended With Error'].End, true, JSON.stringify(branch['Workload Ended With Error']));
    assert.equal(branch['Run Workload'].Next, 'Step2');
  }
});

test("review: a workload function whose Timeout is over workloadMaxRun is refused", () => {
  const stack = emptyStack();
  const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory(), workloadMaxRun: Duration.seconds(30) });
  const fn = (id: string, seconds: number) => new lambda.Function(stack, id, { runtime: lambda.Runtime.PYTHON_3_13, handler: 'i.h', code: lambda.Code.fromInline('x'), timeout: Duration.seconds(seconds) });
  assert.throws(() => lock.lambdaWorkload(stack, fn('Long', 300), { timeout: Duration.seconds(20) }), /Timeout \(300 s\) is over workloadMaxRun \(30 s\)/);
  lock.lambdaWorkload(stack, fn('Short', 30), { timeout: Duration.seconds(20) });
});

test('review: a role under two locks has a Sid per lock; leases out of range are refused', () => {
  const stack = emptyStack();
  const first = new SfnLock(stack, 'First', { codeDirectory: codeDirectory() });
  const second = new SfnLock(stack, 'Second', { codeDirectory: codeDirectory() });
  // Two machines under two locks, sharing one role (nesting is refused).
  const role = new iam.Role(stack, 'Shared', { assumedBy: new iam.ServicePrincipal('states.amazonaws.com') });
  for (const [lock, name] of [[first, 'a'], [second, 'b']] as const) {
    const chain = lock.around(new sfn.Pass(stack, `Work ${name}`), { lockName: name, workloadTimeout: Duration.minutes(1), prefix: `${name}: ` });
    lock.register(new sfn.StateMachine(stack, `Locked${name}`, { definitionBody: sfn.DefinitionBody.fromChainable(chain), role }));
  }
  const policies = Template.fromStack(stack).findResources('AWS::IAM::Policy');
  const sids = Object.values(policies).flatMap((p: any) => p.Properties.PolicyDocument.Statement.map((s: any) => s.Sid)).filter(Boolean);
  const invoke = sids.filter((sid: string) => sid.startsWith('InvokeTheLockFunctions'));
  assert.equal(invoke.length, 2, JSON.stringify(sids));
  assert.equal(new Set(invoke).size, 2, JSON.stringify(invoke));
  assert.throws(() => new SfnLock(emptyStack(), 'L', { codeDirectory: codeDirectory(), maxLease: Duration.seconds(0) }), /maxLease must be 1 to 31536000/);
  assert.throws(() => new SfnLock(emptyStack(), 'L', { codeDirectory: codeDirectory(), defaultLease: Duration.days(400) }), /defaultLease must be 1 to 31536000/);
});

test('review: a machine that uses around() but was not registered is refused at synth', () => {
  const { stack, lock } = locked(twoSteps);
  const other = lock.around(new sfn.Pass(stack, 'Other'), { lockName: 'other', workloadTimeout: Duration.minutes(1), prefix: 'Other: ' });
  new sfn.StateMachine(stack, 'Forgotten', { definitionBody: sfn.DefinitionBody.fromChainable(other) });
  assert.throws(() => Template.fromStack(stack), /Forgotten calls this lock's functions but was not passed to lock.register/);
});
