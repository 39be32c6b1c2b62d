// arn:aws:states:::states:startExecution.sync:2, which the interpreter does not emulate:
// "Run Target State Machine" runs the child definition in this interpreter and answers
// as Step Functions does, under the name Step Functions would give the child (which the
// interpreter's States.Hash gets wrong: correctedStatesHash). And the AWS SDK
// integrations the attach variant reaches such a child by its ARN with:
// aws-sdk:sfn:stopExecution (stopChildExecution) and aws-sdk:sfn:describeExecution
// (describeChildExecution).

import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';

import { StateMachine } from 'aws-local-stepfunctions';

import { ACCOUNT, ARNS, REGION } from './definitions.mjs';
import { namedError } from './local-stack.mjs';
import { outcomeOf } from './run-record.mjs';

/**
 * Evaluates an intrinsic-function expression in aws-local-stepfunctions, with `context`.
 * The one-Pass definition is not validated (asl-validator takes hundreds of milliseconds
 * of CPU, which would delay the state that asked): the expression is the definition's
 * own, which the interpreter has validated with it.
 */
async function evaluateIntrinsic(expression, context) {
  const definition = { StartAt: 'E', States: { E: { Type: 'Pass', Parameters: { 'v.$': expression }, End: true } } };
  const machine = new StateMachine(definition, { validationOptions: { noValidate: true } });
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
 * One interpreter per child definition object (constructing one validates the
 * definition, hundreds of milliseconds of CPU): a child starts as soon as its parent asks.
 */
const childMachines = new WeakMap();
function childMachineFor(definition) {
  if (!childMachines.has(definition)) childMachines.set(definition, new StateMachine(definition));
  return childMachines.get(definition);
}

/**
 * Every child execution this process started, by execution ARN: what StopExecution and
 * DescribeExecution find. `{ run, childRun, description }`: the interpreter's run, the
 * parent's record of it, and its DescribeExecution as the .sync:2 integration gives it
 * (Input and Output as JSON), kept up to date.
 */
const childExecutions = new Map();

/**
 * What Step Functions does for arn:aws:states:::states:startExecution.sync:2: start the
 * target, wait for it to end, answer with its DescribeExecution, Input and Output parsed
 * as JSON (that is what :2 adds over .sync). A child that did not succeed makes the task
 * fail with States.TaskFailed, the Cause being that DescribeExecution as a JSON string
 * (keys in AWS's order), which carries the child's Status, Error and Cause.
 * `taskHandlers` serve the child's own Task states (taskResourceLocalHandlers, by state
 * name): the parent's workload function, so that a child's work is recorded with the
 * parent's. The parent's Task may give up on the child first (its TimeoutSeconds): the
 * child runs on, as in Step Functions, until it ends or is stopped.
 */
export async function runChildExecution(parameters, child, record, taskHandlers = {}) {
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
  const run = childMachineFor(child.definition).run(input, {
    context: { Execution: { Id: childArn, Name: name } },
    overrides: { taskResourceLocalHandlers: taskHandlers },
  });
  const childRun = { executionArn: childArn, input, status: 'RUNNING' };
  const entry = {
    run,
    childRun,
    description: {
      ExecutionArn: childArn,
      Input: input,
      InputDetails: { Included: true },
      Name: name,
      RedriveCount: 0,
      StartDate: startDate,
      StateMachineArn: targetArn,
      Status: 'RUNNING',
    },
  };
  childExecutions.set(childArn, entry);
  record.childRuns.push(childRun);
  record.changed();
  if (child.abort) run.abort();
  const outcome = await outcomeOf(run.result);
  childRun.status = outcome.status;
  childRun.endedAt = performance.now();

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
  entry.description = description;
  record.changed();
  if (outcome.status === 'SUCCEEDED') return description;
  throw namedError('States.TaskFailed', JSON.stringify(description));
}

/** The child execution `executionArn` names, or the error an AWS SDK integration reports. */
function childExecution(executionArn) {
  const child = childExecutions.get(executionArn);
  if (!child) throw namedError('Sfn.ExecutionDoesNotExistException', `Execution Does Not Exist: '${executionArn}'`);
  return child;
}

/**
 * What Step Functions does for arn:aws:states:::aws-sdk:sfn:stopExecution: the execution
 * named by ExecutionArn is stopped (ABORTED; its running task handlers are not, as Step
 * Functions stops no Lambda invocation) and the answer is StopExecution's, {StopDate}.
 * An execution that has already ended is left as it is (the API reference documents no
 * error for it). An ARN no execution has is the API's ExecutionDoesNotExist, which an AWS
 * SDK integration reports as Sfn.ExecutionDoesNotExistException (the service name, '.',
 * the error name with the Exception suffix). Each call is recorded in `record.stops`:
 * {executionArn, found, statusBefore, at}.
 */
export function stopChildExecution(parameters, record) {
  const { ExecutionArn: executionArn } = parameters;
  const child = childExecutions.get(executionArn);
  record.stops.push({ executionArn, found: child !== undefined, statusBefore: child?.childRun.status, at: performance.now() });
  record.changed();
  const { childRun, run } = childExecution(executionArn);
  if (childRun.status === 'RUNNING') run.abort();
  return { StopDate: Date.now() };
}

/**
 * What Step Functions does for arn:aws:states:::aws-sdk:sfn:describeExecution: the
 * DescribeExecution of the execution named by ExecutionArn, RUNNING until it has ended
 * (Input and Output are JSON text in the API's answer); an unknown ARN fails with
 * Sfn.ExecutionDoesNotExistException. Each call is recorded in `record.describes`:
 * {executionArn, status, at}.
 */
export function describeChildExecution(parameters, record) {
  const { ExecutionArn: executionArn } = parameters;
  const child = childExecutions.get(executionArn);
  record.describes.push({ executionArn, status: child?.description.Status, at: performance.now() });
  record.changed();
  const { description } = childExecution(executionArn);
  return {
    ...description,
    Input: JSON.stringify(description.Input),
    ...(description.Output !== undefined && { Output: JSON.stringify(description.Output) }),
  };
}
