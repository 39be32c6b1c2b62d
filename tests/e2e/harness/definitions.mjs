// The state machine definitions as the tests run them: statemachine/*.asl.json (or the
// recipe in docs/modes.md) with test values put in for CloudFormation's DefinitionSubstitutions,
// and the ARNs those values name. Nothing here needs the local stack, so
// tests/e2e/validate-asl.mjs can load definitions without one.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

// The region and account of every ARN the tests make up (functions, state machines,
// executions); the region is the DynamoDB client's too.
export const REGION = process.env.AWS_REGION ?? 'us-east-1';
export const ACCOUNT = '123456789012';
// The partition the definitions' service integrations are in (template.yaml substitutes
// ${Partition} with AWS::Partition): the interpreter's handlers recognise those ARNs.
export const PARTITION = 'aws';

// SFN_LOCK_STATE_MACHINE_DIR, an absolute path, reads the definitions from elsewhere (the
// mutated copies of tests/mutants/hand_mutations.py); unset, from statemachine/.
export const STATE_MACHINE_DIR = process.env.SFN_LOCK_STATE_MACHINE_DIR
  ? new URL(`file://${process.env.SFN_LOCK_STATE_MACHINE_DIR.replace(/\/*$/, '/')}`)
  : new URL('../../../statemachine/', import.meta.url);

const functionArn = (name) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:sfn-lock-e2e-${name}`;
export const stateMachineArn = (name) => `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${name}`;

export const ARNS = Object.freeze({
  acquire: functionArn('AcquireLock'),
  release: functionArn('ReleaseLock'),
  workload: functionArn('Workload'),
  target: stateMachineArn('sfn-lock-e2e-target'),
});

/**
 * The prefix of a state machine's execution ARNs (`...:execution:NAME:`), as template.yaml
 * builds ${TargetExecutionArnPrefix} for the attach variant's Stop Target Execution.
 */
export function executionArnPrefix(machineArn) {
  const [arn, partition, service, region, account, kind, name] = machineArn.split(':');
  if (kind !== 'stateMachine') throw new Error(`not a state machine ARN: ${machineArn}`);
  return [arn, partition, service, region, account, 'execution', name, ''].join(':');
}

/** The Lambda binary `cargo lambda watch` serves for each function ARN in the definitions. */
export const BINARY_BY_FUNCTION_ARN = Object.freeze({
  [ARNS.acquire]: 'acquire-lock',
  [ARNS.release]: 'release-lock',
});

/**
 * What template.yaml substitutes for ${LockResultPath}, by PassLockToWorkload: the raw
 * JSON text of Acquire Lock's ResultPath (null, or the key the workload finds its lock in).
 */
export const LOCK_RESULT_PATH = Object.freeze({ off: 'null', on: '"$.sfnLock"' });

/**
 * Test values for every DefinitionSubstitutions placeholder. Timeouts are small so that
 * a stuck run fails fast; the lock name is always replaced per scenario.
 */
export const TEST_SUBSTITUTIONS = Object.freeze({
  Partition: PARTITION,
  AcquireLockFunctionArn: ARNS.acquire,
  ReleaseLockFunctionArn: ARNS.release,
  WorkloadFunctionArn: ARNS.workload,
  TargetStateMachineArn: ARNS.target,
  TargetExecutionArnPrefix: executionArnPrefix(ARNS.target),
  LockName: 'e2e-unnamed',
  LockLimit: 1,
  LeaseMarginSeconds: 30,
  MaxWaitSeconds: 45,
  WorkloadTimeoutSeconds: 5,
  // The attach variant's bound on its child (Run Target State Machine's TimeoutSeconds).
  TargetTimeoutSeconds: 30,
  // The Wait after a workload that may still run (States.Timeout, ...) really waits
  // this long unless a scenario passes waitTimeOverrides: short, but not skipped.
  WorkloadMaxRunSeconds: 4,
  // PassLockToWorkload=false: the Acquire Lock result is discarded (template.yaml's !If).
  LockResultPath: LOCK_RESULT_PATH.off,
});

const PLACEHOLDER = /\$\{([A-Za-z0-9_]+)\}/g;

/** The `${Name}` placeholders a definition file uses, in order of first use. */
export function placeholdersIn(file) {
  const text = readFileSync(new URL(file, STATE_MACHINE_DIR), 'utf8');
  return [...new Set([...text.matchAll(PLACEHOLDER)].map((match) => match[1]))];
}

/**
 * Substitutes placeholders the way CloudFormation's DefinitionSubstitutions does (plain
 * text replacement, so numbers land as bare JSON numbers) and parses the result.
 */
export function loadDefinition(file, values) {
  const text = readFileSync(new URL(file, STATE_MACHINE_DIR), 'utf8');
  return substituteDefinition(text, values, file);
}

/** loadDefinition for definition text from anywhere (e.g. the recipe in docs/modes.md). */
export function substituteDefinition(text, values, where = 'definition') {
  const substituted = text.replace(PLACEHOLDER, (whole, name) => {
    if (!(name in values)) throw new Error(`${where}: no value for ${whole}`);
    return String(values[name]);
  });
  return JSON.parse(substituted);
}

export const RECIPE_DOC = new URL('../../../docs/modes.md', import.meta.url);

/**
 * The ASL of the recipe in docs/modes.md for adding the lock to a state machine by hand: the one
 * fenced json block between the `<!-- recipe:begin -->` and `<!-- recipe:end -->` lines,
 * as text, placeholders unsubstituted.
 */
export function docsRecipe() {
  const text = readFileSync(RECIPE_DOC, 'utf8');
  const section = /^<!-- recipe:begin -->\n([\s\S]*?)^<!-- recipe:end -->$/m.exec(text);
  if (!section) throw new Error('docs/modes.md: no <!-- recipe:begin --> ... <!-- recipe:end --> section');
  const blocks = [...section[1].matchAll(/^```json\n([\s\S]*?)^```$/gm)];
  if (blocks.length !== 1) throw new Error(`docs/modes.md: the recipe section has ${blocks.length} json blocks, not 1`);
  return blocks[0][1];
}

/**
 * `file` with the test substitutions, on `lockName`, less the placeholders in `unused`
 * (so that a definition which starts using one of them fails to load instead of quietly
 * getting a value).
 */
function definitionFor(file, lockName, values, unused = []) {
  const substitutions = { ...TEST_SUBSTITUTIONS, LockName: lockName, ...values };
  for (const name of unused) delete substitutions[name];
  return loadDefinition(file, substitutions);
}

/** locked-workflow.asl.json with the test substitutions, on `lockName`. */
export function lockedWorkflowFor(lockName, values = {}) {
  return definitionFor('locked-workflow.asl.json', lockName, values);
}

/** queued-workflow.asl.json (the fair queue: Acquire Lock waits on a task token), on `lockName`. */
export function queuedWorkflowFor(lockName, values = {}) {
  return definitionFor('queued-workflow.asl.json', lockName, values);
}

/**
 * skip-if-running.asl.json with the test substitutions, on `lockName`: the same values as
 * lockedWorkflowFor but MaxWaitSeconds, which it must not use (it never waits).
 */
export function skipIfRunningFor(lockName, values = {}) {
  return definitionFor('skip-if-running.asl.json', lockName, values, ['MaxWaitSeconds']);
}

/** A lock name no other scenario (or earlier run against the same table) uses. */
export function uniqueLockName(scenario) {
  return `e2e-${scenario}-${randomUUID().slice(0, 8)}`;
}
