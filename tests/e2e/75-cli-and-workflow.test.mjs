// `sfn-lock run` (the CLI, a real process) and the locked workflow (the real ASL and
// binaries) on the same lock in the same store exclude each other, both ways: a shell
// job and a Step Functions execution of one ETL never run at once.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  closeClients,
  lockedWorkflowFor as definitionFor,
  readLock,
  startExecution,
  uniqueLockName,
  warmUp,
} from './harness.mjs';

const CLI = new URL('../../target/debug/sfn-lock', import.meta.url).pathname;
const STORE = process.env.SFN_LOCK_STORE_URL;

before(() => {
  assert.ok(existsSync(CLI), `${CLI} is missing: build it first (cargo build -p sfn-lock-cli; make test does)`);
  assert.ok(STORE, 'SFN_LOCK_STORE_URL: run under scripts/local-stack.sh');
  return warmUp();
});
after(closeClients);

/** Resolves once `path` exists (the CLI's command writes it), or fails after 60 s. */
async function fileWritten(path) {
  const deadline = Date.now() + 60_000;
  while (!existsSync(path)) {
    assert.ok(Date.now() < deadline, `${path} was never written`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return readFileSync(path, 'utf8').trim();
}

describe('sfn-lock run and the locked workflow on one lock', () => {
  test('the CLI holds: the execution waits, and acquires (a higher token) only after the command ended', async (t) => {
    const lockName = uniqueLockName('cli-holds');
    const dir = mkdtempSync(join(tmpdir(), 'sfn-lock-cli-'));
    const [started, finish, ended] = ['started', 'finish', 'ended'].map((name) => join(dir, name));
    // The command says it runs (with its token), then runs until told to finish.
    const script = `echo "$SFN_LOCK_OWNER $SFN_LOCK_FENCING_TOKEN" > ${started}; ` +
      `while [ ! -e ${finish} ]; do sleep 0.05; done; echo done > ${ended}`;
    // A process group of its own: a failing test kills the CLI and its command
    // (below) instead of leaving them to keep the test run alive.
    const cli = spawn(CLI, ['run', '--store', STORE, lockName, '--', 'sh', '-c', script], {
      stdio: 'inherit',
      detached: true,
    });
    const exited = new Promise((resolve) => cli.on('exit', (code) => resolve(code)));
    t.after(() => {
      if (cli.exitCode === null && cli.signalCode === null) process.kill(-cli.pid, 'SIGKILL');
    });
    const [cliOwner, cliToken] = (await fileWritten(started)).split(' ');

    let endedBeforeWorkload;
    const execution = startExecution(definitionFor(lockName), { job: 'etl' }, {
      scenario: 'cli-holds',
      workload: () => {
        endedBeforeWorkload = existsSync(ended);
        return { ran: true };
      },
    });
    const refusals = (record) => record.errorsOf(record.acquireAttempts).filter((error) => error === 'LockUnavailable');
    await execution.record.waitFor((record) => refusals(record).length >= 2, 'two LockUnavailable answers');
    assert.equal(execution.record.workloadCalls.length, 0, 'no workload while the CLI holds the lock');
    const refused = execution.record.acquireAttempts.find((attempt) => attempt.error === 'LockUnavailable');
    assert.equal(JSON.parse(JSON.parse(refused.cause).errorMessage).holder, cliOwner);

    writeFileSync(finish, '');
    assert.equal(await exited, 0);
    const outcome = await execution.outcome;
    assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.equal(endedBeforeWorkload, true, 'the workload started only after the command had ended');
    assert.ok(execution.record.lease.fencingToken > Number(cliToken), 'the execution got a higher token');
    assert.equal((await readLock(lockName)).held, false);
  });

  test('the execution holds: sfn-lock run -n exits 111 naming it; after the execution it runs, with a higher token', async () => {
    const lockName = uniqueLockName('sfn-holds');
    const runOnce = () =>
      spawnSync(CLI, ['run', '-n', '--store', STORE, lockName, '--', 'sh', '-c', 'echo "$SFN_LOCK_FENCING_TOKEN"'], {
        encoding: 'utf8',
      });
    let during;
    const execution = startExecution(definitionFor(lockName), { job: 'etl' }, {
      scenario: 'sfn-holds',
      workload: () => {
        during = runOnce();
        return { ran: true };
      },
    });
    const outcome = await execution.outcome;
    assert.equal(outcome.status, 'SUCCEEDED', JSON.stringify(outcome));
    assert.equal(during.status, 111, during.stderr);
    assert.equal(during.stdout, '', 'the command did not run');
    assert.ok(during.stderr.includes(execution.executionArn), during.stderr);

    const afterwards = runOnce();
    assert.equal(afterwards.status, 0, afterwards.stderr);
    assert.ok(Number(afterwards.stdout.trim()) > execution.record.lease.fencingToken, afterwards.stdout);
  });
});
