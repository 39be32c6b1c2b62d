// The example app's own entry point, as a user runs it: `node
// dist/example/app.js` synthesizes offline (app.synth(), no CDK CLI, no AWS
// account) into CDK_OUTDIR, each lock function's asset a copy of its
// bootstrap directory.
import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { test } from 'node:test';
import { codeDirectory } from './helpers';

test('node dist/example/app.js writes the template and the three bootstrap assets', () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'sfn-lock-cdk-out-'));
  const code = codeDirectory();
  const printed = execFileSync(process.execPath, [path.join(__dirname, '..', 'example', 'app.js')], {
    env: { ...process.env, SFN_LOCK_CODE_DIR: code, CDK_OUTDIR: out, CDK_DEFAULT_ACCOUNT: '210987654321', CDK_DEFAULT_REGION: 'us-east-2' },
    encoding: 'utf8',
  });
  assert.match(printed, /synthesized SfnLockExample\.template\.json/);
  const template = JSON.parse(fs.readFileSync(path.join(out, 'SfnLockExample.template.json'), 'utf8'));
  const types = Object.values(template.Resources).map((r: any) => r.Type);
  assert.equal(types.filter((t) => t === 'AWS::StepFunctions::StateMachine').length, 1);
  assert.equal(types.filter((t) => t === 'AWS::Lambda::Function').length, 4);
  // The environment came from CDK_DEFAULT_*: the stack is bound to it.
  const manifest = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
  assert.equal(manifest.artifacts.SfnLockExample.environment, 'aws://210987654321/us-east-2');
  const assets = fs.readdirSync(out).filter((f) => f.startsWith('asset.'));
  const bootstraps = assets.filter((a) => fs.existsSync(path.join(out, a, 'bootstrap')));
  assert.equal(bootstraps.length, 3, `assets: ${assets}`);
});

test('the example names a missing asset directory and how to build it', () => {
  const missing = path.join(os.tmpdir(), 'sfn-lock-no-such-dir');
  assert.throws(() => execFileSync(process.execPath, [path.join(__dirname, '..', 'example', 'app.js')], {
    env: { ...process.env, SFN_LOCK_CODE_DIR: missing, CDK_OUTDIR: fs.mkdtempSync(path.join(os.tmpdir(), 'o-')) },
    stdio: 'pipe',
  }), (e: any) => /cargo lambda build --release --arm64/.test(String(e.stderr)));
});
