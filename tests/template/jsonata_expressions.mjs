// What the JSONata flavour's data-routing expressions compute, beside what
// the JSONPath twin does on the same data (tests/template/asl_flavours.py
// compares the states' shape, not what an expression computes): evaluated
// with the jsonata package, for an object, an array, an empty array, a
// string and null.
//
// 1. Adding sfnLock to the workload's input (PassLockToWorkload: the
//    Parallel's Arguments, the attach child's Input). JSONPath's ResultPath
//    "$.sfnLock" fails on any input that is not an object
//    (States.ResultPathMatchFailure): the lock is never used for work it was
//    not given to. The JSONata expression must fail there too, not $merge an
//    array's objects into one. Without PassLockToWorkload: the input as it is.
// 2. Check Whether Workload Failed: the marker only on an object output;
//    JSONPath's IsPresent on an array is false.
//
//   node tests/template/jsonata_expressions.mjs            (check.sh runs it)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import jsonata from 'jsonata';

const FILES = ['locked-workflow', 'queued-workflow', 'skip-if-running', 'attach-existing'];
const GRANT = { lockName: 'l', owner: 'o', fencingToken: '1', expiresAt: 'e' };
const INPUTS = [{ a: 1 }, [{ a: 1 }, { b: 2 }], [], 'text', null];
const MARKER = { sfnLockWorkloadError: { Error: 'E', Cause: 'c' } };

/** The file with its placeholders filled in (LockResultPath as given, every other a 1). */
function definition(name, lockResultPath) {
  const text = readFileSync(new URL(`../../statemachine/jsonata/${name}.asl.json`, import.meta.url), 'utf8')
    .replaceAll('${LockResultPath}', lockResultPath)
    .replace(/\$\{[A-Za-z]+\}/g, '1');
  return JSON.parse(text);
}

/** Every JSONata string of the definition that matches `pattern`, as [where, expression]. */
function expressions(value, pattern, where = '') {
  if (typeof value === 'string') {
    const inner = value.match(/^\{%(.*)%\}$/s);
    return inner && pattern.test(inner[1]) ? [[where, inner[1]]] : [];
  }
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, child]) =>
    key === 'Comment' ? [] : expressions(child, pattern, `${where}/${key}`));
}

/** The expression's value, or {error} when it raises one (States.QueryEvaluationError). */
async function evaluate(expression, input, variables) {
  try {
    const value = await jsonata(expression).evaluate(null, { states: { input }, ...variables });
    // As Step Functions passes it on: JSON (jsonata's objects and sequences are plain data then).
    return { value: value === undefined ? undefined : JSON.parse(JSON.stringify(value)) };
  } catch (error) {
    return { error: error.message };
  }
}

let checked = 0;
for (const name of FILES) {
  for (const [passLock, path] of [[true, '"$.sfnLock"'], [false, 'null']]) {
    const found = expressions(definition(name, path), /\$sfnLockResultPath/);
    assert.ok(found.length >= 1, `${name}: no expression reads $sfnLockResultPath`);
    for (const [where, expression] of found) {
      for (const input of INPUTS) {
        const got = await evaluate(expression, input, { sfnLock: GRANT, sfnLockResultPath: passLock ? '$.sfnLock' : null });
        const what = `${name} ${where} on ${JSON.stringify(input)} (PassLockToWorkload ${passLock})`;
        const object = input !== null && typeof input === 'object' && !Array.isArray(input);
        if (!passLock) assert.deepEqual(got, { value: input }, `${what}: the input as it is`);
        else if (object) assert.deepEqual(got, { value: { ...input, sfnLock: GRANT } }, what);
        else assert.ok('error' in got, `${what}: must fail as JSONPath's ResultPath does, got ${JSON.stringify(got)}`);
        checked += 1;
      }
    }
  }
  const conditions = expressions(definition(name, 'null'), /sfnLockWorkloadError/)
    .filter(([where]) => where.endsWith('/Condition'));
  for (const [where, expression] of conditions) {
    const cases = [[MARKER, true], [{ x: 1 }, false], [[MARKER, { x: 1 }], false], [[MARKER, MARKER], false],
      [[], false], ['text', false], [null, false]];
    for (const [input, expected] of cases) {
      const got = await evaluate(expression, input, {});
      assert.deepEqual(got, { value: expected }, `${name} ${where} on ${JSON.stringify(input)}`);
      checked += 1;
    }
  }
}
console.log(`jsonata expressions: ${checked} evaluations as the JSONPath twins route the same data`);
