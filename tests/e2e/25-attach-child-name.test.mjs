// The attach variant names its child deterministically, so that the cleanup sweep can
// find the child of an ended parent (release-execution-locks computes the same name):
// lowercase hex SHA-256 of the parent's execution ARN, '-', the parent's redrive count.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { TEST_SUBSTITUTIONS, closeClients, loadDefinition, runExecution, uniqueLockName, warmUp } from './harness.mjs';

before(warmUp);
after(closeClients);

const parentFor = (lockName) => loadDefinition('attach-existing.asl.json', { ...TEST_SUBSTITUTIONS, LockName: lockName });
const CHILD = { StartAt: 'Echo', States: { Echo: { Type: 'Pass', End: true } } };
const sha256Hex = (text) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('attach: the child execution name', () => {
  test("is sha256(parent's execution ARN) + '-0' on a first run", async () => {
    const lockName = uniqueLockName('child-name');
    const run = await runExecution(parentFor(lockName), { job: 'x' }, { scenario: 'child-name', child: { definition: CHILD } });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    const [child] = run.record.childRuns;
    const name = child.executionArn.split(':').pop();
    assert.equal(name, `${sha256Hex(run.executionArn)}-0`);
    assert.match(name, /^[0-9a-f]{64}-0$/);
    assert.ok(name.length <= 80, 'execution names are at most 80 characters');
  });

  test("carries the parent's redrive count, so a redriven parent starts a child of its own", async () => {
    const lockName = uniqueLockName('child-name-redriven');
    const run = await runExecution(parentFor(lockName), { job: 'x' }, {
      scenario: 'child-name-redriven',
      child: { definition: CHILD },
      redriveCount: 3,
    });
    assert.equal(run.status, 'SUCCEEDED', JSON.stringify(run));
    assert.equal(run.record.childRuns[0].executionArn.split(':').pop(), `${sha256Hex(run.executionArn)}-3`);
  });
});
