// around(lambdaWorkload(...)) against the shipped definitions, state for
// state modulo names: a Retry or Catch error list, a target, a timeout or a
// path that differs fails here, whichever side drifted.
import { strict as assert } from 'assert';
import * as path from 'path';
import { test } from 'node:test';
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Template } from 'aws-cdk-lib/assertions';
import { differences } from './asl-shape';
import { definitionOf, example, exampleStack, REPO, shipped } from './helpers';

const FILES = { wait: 'locked-workflow', queue: 'queued-workflow', skip: 'skip-if-running' } as const;

for (const [mode, file] of Object.entries(FILES)) {
  test(`onContention '${mode}' renders statemachine/${file}.asl.json`, () => {
    const { template } = example({ onContention: mode as keyof typeof FILES });
    assert.deepEqual(differences(shipped(file), definitionOf(template)), []);
  });
}

// The JSONata twins (statemachine/jsonata/). A missing file fails the test
// (shipped() cannot read it), never skips it.
const JSONATA_DIR = path.join(REPO, 'statemachine', 'jsonata');
for (const [mode, file] of Object.entries(FILES)) {
  test(`JSONata, '${mode}': renders statemachine/jsonata/${file}.asl.json`, () => {
    const { template } = example({ onContention: mode as keyof typeof FILES, queryLanguage: sfn.QueryLanguage.JSONATA });
    assert.deepEqual(differences(shipped(file, JSONATA_DIR), definitionOf(template)), []);
  });
}

test('a planted drift is reported, naming the state', () => {
  const { template } = example();
  const drifted = definitionOf(template);
  // A release that no longer retries a Lambda timeout.
  const retry = drifted.States['Release Lock'].Retry[0];
  retry.ErrorEquals = retry.ErrorEquals.filter((e: string) => e !== 'Sandbox.Timedout');
  // An acquire whose lost answer no longer releases: its Catch goes straight to a Fail.
  drifted.States['Acquire Lock'].Catch[0].Next = 'Fail With Original Error';
  const found = differences(shipped('locked-workflow'), drifted);
  assert.ok(found.some((d) => d.startsWith('Release Lock / Release Lock: Retry:')), found.join('\n'));
  assert.ok(found.some((d) => d.startsWith('Acquire Lock / Acquire Lock: Catch:')), found.join('\n'));
});

test('a prefix renames every state and changes nothing else', () => {
  const stack = exampleStack();
  const { lock, workload } = stack;
  const timeout = Duration.seconds(300);
  const chain = lock.around(lock.lambdaWorkload(stack, workload, { timeout, prefix: 'B: ' }),
    { lockName: 'example', workloadTimeout: timeout, prefix: 'B: ' });
  const machine = new sfn.StateMachine(stack, 'Second', { definitionBody: sfn.DefinitionBody.fromChainable(chain) });
  lock.register(machine);
  const template = Template.fromStack(stack);
  const plain = definitionOf(template);
  const prefixed = definitionOf(template, 'Second');
  assert.ok(Object.keys(prefixed.States).every((n) => n.startsWith('B: ')));
  assert.deepEqual(differences(plain, prefixed), []);
});
