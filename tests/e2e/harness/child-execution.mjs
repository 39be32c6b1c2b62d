// arn:aws:states:::states:startExecution.sync:2, which the interpreter does not emulate:
// "Run Target State Machine" runs the child definition in this interpreter and answers
// as Step Functions does, under the name Step Functions would give the child (which the
// interpreter's States.Hash gets wrong: correctedStatesHash).

import { createHash, randomUUID } from 'node:crypto';

import { StateMachine } from 'aws-local-stepfunctions';

import { ACCOUNT, ARNS, REGION } from './definitions.mjs';
import { namedError } from './local-stack.mjs';
import { outcomeOf } from './run-record.mjs';

/** Evaluates an intrinsic-function expression in aws-local-stepfunctions, with `context`. */
async function evaluateIntrinsic(expression, context) {
  const machine = new StateMachine({ StartAt: 'E', States: { E: { Type: 'Pass', Parameters: { 'v.$': expression }, End: true } } });
  return (await machine.run({}, { context }).result).v;
}

/**
 * aws-local-stepfunctions 3.0.0 computes States.Hash(..., 'SHA-256') wrongly for inputs
 * of 56 bytes or more (its compression loop reads every block after the first at the
 * wrong offset: `getUint32(i + t * 4)` with i counting words), and an execution ARN is
 * longer than that. Step Functions computes the standard digest (lowercase hex), which is
 * what release-execution-locks recomputes to find the child. So each
 * States.Hash(arg, 'SHA-256') in `expression` is replaced by the literal digest of its
 * argument (evaluated by the interpreter), and the rest is evaluated by the interpreter.
 */
export async function correctedStatesHash(expression, context) {
  const call = "States.Hash(";
  let rewritten = '';
  let rest = expression;
  for (let at = rest.indexOf(call); at !== -1; at = rest.indexOf(call)) {
    let depth = 0;
    let end = at + call.length;
    let quoted = false;
    for (; end < rest.length; end += 1) {
      const c = rest[end];
      if (c === "'" && rest[end - 1] !== '\\') quoted = !quoted;
      if (quoted) continue;
      if (c === '(') depth += 1;
      if (c === ')' && depth-- === 0) break;
    }
    const args = rest.slice(at + call.length, end);
    const algorithm = /,\s*'SHA-256'\s*$/.exec(args);
    if (!algorithm) throw new Error(`correctedStatesHash: only SHA-256 with a literal name: ${expression}`);
    const value = await evaluateIntrinsic(args.slice(0, algorithm.index).trim(), context);
    const digest = createHash('sha256').update(String(value), 'utf8').digest('hex');
    rewritten += `${rest.slice(0, at)}'${digest}'`;
    rest = rest.slice(end + 1);
  }
  rewritten += rest;
  return rewritten.startsWith('States.') ? evaluateIntrinsic(rewritten, context) : rewritten;
}

/**
 * What Step Functions does for arn:aws:states:::states:startExecution.sync:2: start the
 * target, wait for it to end, answer with its DescribeExecution, Input and Output parsed
 * as JSON (that is what :2 adds over .sync). A child that did not succeed makes the task
 * fail with States.TaskFailed, the Cause being that DescribeExecution as a JSON string
 * (keys in AWS's order), which carries the child's Status, Error and Cause.
 */
export async function runChildExecution(parameters, child, record) {
  if (!child) throw new Error('this run has no child definition');
  const { StateMachineArn: targetArn, Input: input } = parameters;
  if (targetArn !== ARNS.target) {
    throw namedError('StepFunctions.StateMachineDoesNotExistException', `State Machine Does Not Exist: '${targetArn}'`);
  }
  // The Name the state gives (attach-existing derives it from the parent's ARN), else a
  // random one, as StartExecution picks when none is given.
  const name = parameters.Name ?? randomUUID();
  const targetName = targetArn.split(':').pop();
  const childArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${targetName}:${name}`;
  const startDate = Date.now();
  const run = new StateMachine(child.definition).run(input, { context: { Execution: { Id: childArn, Name: name } } });
  const childRun = { executionArn: childArn, input, status: 'RUNNING' };
  record.childRuns.push(childRun);
  record.changed();
  if (child.abort) run.abort();
  const outcome = await outcomeOf(run.result);
  childRun.status = outcome.status;
  record.changed();

  const description = {
    ...(outcome.cause !== undefined && { Cause: outcome.cause }),
    ...(outcome.error !== undefined && { Error: outcome.error }),
    ExecutionArn: childArn,
    Input: input,
    InputDetails: { Included: true },
    Name: name,
    ...(outcome.status === 'SUCCEEDED' && { Output: outcome.output, OutputDetails: { Included: true } }),
    RedriveCount: 0,
    RedriveStatus: outcome.status === 'SUCCEEDED' ? 'NOT_REDRIVABLE' : 'REDRIVABLE',
    StartDate: startDate,
    StateMachineArn: targetArn,
    Status: outcome.status,
    StopDate: Date.now(),
  };
  if (outcome.status === 'SUCCEEDED') return description;
  throw namedError('States.TaskFailed', JSON.stringify(description));
}
