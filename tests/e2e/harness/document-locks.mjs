// A lock's state read straight from the S3 or SSM store (LOCK_STORE_URL s3://, ssm://),
// in the shape readLock gives for DynamoDB. The layout is the one DESIGN.md describes:
// one JSON document per lock, an S3 object `PREFIX<encoded name>`, or SSM generations
// `/PATH/<encoded name>/<generation>` with `current` pointing near the newest.

import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';

import { REGION } from './definitions.mjs';

/** The store's encoding of a lock name: letters, digits and `-` stay, other bytes `_XX`. */
export function encodeName(name) {
  let encoded = '';
  for (const byte of new TextEncoder().encode(name)) {
    const char = String.fromCharCode(byte);
    encoded += /[A-Za-z0-9-]/.test(char) ? char : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}

let s3;
let ssm;

async function readDocument(storeUrl, lockName) {
  if (storeUrl.startsWith('s3://')) {
    const [bucket, ...prefix] = storeUrl.slice('s3://'.length).split('/');
    s3 ??= new S3Client({ region: REGION, forcePathStyle: true, maxAttempts: 2 });
    try {
      const object = await s3.send(
        new GetObjectCommand({ Bucket: bucket, Key: `${prefix.join('/')}${encodeName(lockName)}` }),
      );
      return JSON.parse(await object.Body.transformToString());
    } catch (error) {
      if (error.name === 'NoSuchKey') return undefined;
      throw error;
    }
  }
  const path = storeUrl.slice('ssm://'.length).replace(/\/+$/, '');
  ssm ??= new SSMClient({ region: REGION, maxAttempts: 2 });
  let newest;
  let NextToken;
  do {
    const page = await ssm.send(
      new GetParametersByPathCommand({ Path: `${path}/${encodeName(lockName)}`, NextToken }),
    );
    for (const { Name, Value } of page.Parameters ?? []) {
      if (Name.endsWith('/current')) continue;
      const envelope = JSON.parse(Value);
      if (!newest || envelope.generation > newest.generation) newest = envelope;
    }
    NextToken = page.NextToken;
  } while (NextToken);
  return newest?.lock;
}

/** The lock as readLock describes it; a holder whose lease ran out still counts as held. */
export async function readDocumentLock(storeUrl, lockName) {
  const doc = await readDocument(storeUrl, lockName);
  if (!doc) return { exists: false, held: false };
  const holders = doc.holders ?? [];
  const mutex = holders.length === 1 && holders[0].limit === 1 ? holders[0] : undefined;
  return {
    exists: true,
    held: holders.length > 0,
    holderCount: mutex ? 0 : holders.length,
    owner: mutex?.owner,
    fencingToken: doc.fencingToken,
    acquiredAt: mutex?.acquiredAt,
    expiresAt: mutex?.expiresAt,
  };
}
