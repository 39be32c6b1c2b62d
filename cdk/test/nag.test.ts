// cdk-nag's AwsSolutions pack on the synthesized example: no finding left
// unacknowledged; every acknowledgment says why (lib/nag.ts). The last test
// shows the pack failing a stack.
import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { test } from 'node:test';
import { App, Stack, Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ExampleStack } from '../example/app';
import { codeDirectory } from './helpers';

const env = { account: '123456789012', region: 'eu-west-1' };

/** Synthesizes with the pack; the findings "RULE at PATH", [] when none. */
function findings(build: (app: App) => Stack): string[] {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'sfn-lock-nag-'));
  const app = new App({ outdir });
  build(app);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  try {
    app.synth();
    return [];
  } catch (e) {
    const report = path.join(outdir, 'validation-report.json');
    if (!fs.existsSync(report)) throw e;
    return JSON.parse(fs.readFileSync(report, 'utf8')).pluginReports
      .flatMap((p: any) => p.violations)
      .flatMap((v: any) => v.violatingConstructs.map((c: any) => `${v.ruleName} at ${c.constructPath}`));
  }
}

for (const mode of ['wait', 'queue', 'skip'] as const) {
  test(`AwsSolutions: the example ('${mode}') has no unacknowledged finding`, () => {
    assert.deepEqual(findings((app) => new ExampleStack(app, 'Example', { codeDirectory: codeDirectory(), env, onContention: mode })), []);
  });
}

test('AwsSolutions: the example in JSONata has no unacknowledged finding', () => {
  assert.deepEqual(findings((app) => new ExampleStack(app, 'Example', {
    codeDirectory: codeDirectory(), env, queryLanguage: sfn.QueryLanguage.JSONATA,
  })), []);
});

test('every acknowledgment says why', () => {
  const stack = new ExampleStack(new App(), 'Example', { codeDirectory: codeDirectory(), env });
  const acks = stack.node.findAll().flatMap((c) => c.node.metadata
    .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
    .flatMap((m) => Object.entries(m.data as Record<string, string>)));
  // The lock's own (task tokens on three roles, the sweep's DescribeExecution,
  // the two lock functions' versions) and the example's three.
  assert.ok(acks.length >= 9, JSON.stringify(acks));
  for (const [id, reason] of acks) assert.ok(reason.length >= 60, `${id}: ${reason}`);
});

test('the pack fails a stack: a queue with no dead-letter queue and no TLS rule', () => {
  const found = findings((app) => {
    const stack = new Stack(app, 'Bare', { env });
    new sqs.Queue(stack, 'Queue');
    return stack;
  });
  assert.ok(found.some((f) => f.startsWith('AwsSolutions-SQS3')), found.join('\n'));
  assert.ok(found.some((f) => f.startsWith('AwsSolutions-SQS4')), found.join('\n'));
});
