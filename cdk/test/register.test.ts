// register() and its checks (lib/sfn-lock.ts): found by re-reading the change.
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { Duration } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { SfnLock } from '../lib';
import { codeDirectory, emptyStack } from './helpers';

function locked() {
  const stack = emptyStack();
  const lock = new SfnLock(stack, 'Lock', { codeDirectory: codeDirectory() });
  const chain = lock.around(new sfn.Pass(stack, 'Work'), { lockName: 'nightly', workloadTimeout: Duration.minutes(10) });
  const machine = new sfn.StateMachine(stack, 'Locked', { definitionBody: sfn.DefinitionBody.fromChainable(chain) });
  return { stack, lock, machine };
}

test('register() twice is register() once: the sweep lists the machine once, its entries count once', () => {
  const { stack, lock, machine } = locked();
  const logGroup = new logs.LogGroup(stack, 'Logs');
  lock.register(machine, { logGroup });
  lock.register(machine, { logGroup });
  const template = Template.fromStack(stack);
  assert.equal(Object.keys(template.findResources('AWS::Logs::MetricFilter')).length, 1);
  const sweep = Object.values(template.findResources('AWS::Lambda::Function'))
    .map((f) => f.Properties?.Environment?.Variables?.SWEPT_STATE_MACHINE_ARNS)
    .find((arns) => arns !== undefined);
  assert.equal(JSON.stringify(sweep).split('"Ref":"Locked').length - 1, 1, JSON.stringify(sweep));
});

test('around() without register(): synthesis names the machine, and says "no state machine registered" once', () => {
  const { stack } = locked();
  assert.throws(() => Template.fromStack(stack), (error: Error) => {
    assert.match(error.message, /state machine Test\/Locked calls this lock's functions but was not passed to lock\.register\(\)/);
    assert.equal(error.message.split('no state machine registered').length - 1, 1, error.message);
    return true;
  });
});
