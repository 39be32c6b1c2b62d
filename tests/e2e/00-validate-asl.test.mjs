// Checks that need no local stack: the definitions validate, and their re-raise path
// copes with an error output that has no Cause (which a Task in aws-local-stepfunctions
// never produces, but Step Functions may, e.g. for a task timeout).
import assert from 'node:assert/strict';
import test from 'node:test';

import { ExecutionError, StateMachine } from 'aws-local-stepfunctions';

import { TEST_SUBSTITUTIONS, loadDefinition } from './harness.mjs';
import { DEFINITIONS, validateAll } from './validate-asl.mjs';

test('every statemachine/*.asl.json validates with its placeholders substituted', () => {
  assert.deepEqual(validateAll(), []);
});

for (const file of Object.keys(DEFINITIONS)) {
  test(`${file}: the failure path re-raises the original error with or without a Cause`, async () => {
    const { States: states } = loadDefinition(file, TEST_SUBSTITUTIONS);
    const reRaise = {
      StartAt: 'Check Whether Error Has Cause',
      States: Object.fromEntries(
        ['Check Whether Error Has Cause', 'Fail With Original Error', 'Fail With Original Error Name'].map((name) => [
          name,
          states[name],
        ]),
      ),
    };
    const failureOf = async (errorOutput) => {
      try {
        await new StateMachine(reRaise).run(errorOutput).result;
      } catch (error) {
        assert.ok(error instanceof ExecutionError, String(error));
        return { error: error.cause.name, cause: error.cause.message };
      }
      assert.fail('the execution succeeded');
    };

    assert.deepEqual(await failureOf({ Error: 'WorkloadExploded', Cause: 'disk full' }), {
      error: 'WorkloadExploded',
      cause: 'disk full',
    });
    const withoutCause = await failureOf({ Error: 'States.Timeout' });
    assert.equal(withoutCause.error, 'States.Timeout', 'not States.Runtime from a CausePath on a missing Cause');
  });
}
