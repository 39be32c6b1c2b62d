// Runs sfn-lock's real ASL (statemachine/*.asl.json) in aws-local-stepfunctions, with the
// lock states served by the real acquire-lock / release-lock binaries that
// scripts/local-stack.sh starts under `cargo lambda watch`, against its DynamoDB (moto).
//
// aws-local-stepfunctions does not emulate the optimized integrations
// (arn:${Partition}:states:::lambda:invoke, states:startExecution.sync:2; the tests
// substitute Partition aws); it would call the Lambda API with the Resource string as a
// function name. So every such state gets a
// taskResourceLocalHandler (keyed by state name) that does what Step Functions does:
//   lambda:invoke      unwrap {FunctionName, Payload}, invoke, wrap the answer as
//                      {Payload, StatusCode: 200, ...}; a function error becomes an error
//                      named by its errorType whose Cause is the function's error payload.
//   startExecution.sync:2  run the child definition in this interpreter and answer with
//                      the child's DescribeExecution (Output as JSON), or fail with
//                      States.TaskFailed whose Cause is that DescribeExecution.
//   aws-sdk:sfn:stopExecution  stop the child run by its ARN (abort; its running task
//                      handlers run on, as Lambda invocations do), answer {StopDate}; an
//                      ARN no child has fails with Sfn.ExecutionDoesNotExistException.
//   aws-sdk:sfn:describeExecution  the child's DescribeExecution by its ARN (RUNNING
//                      until it ended), the same error for an unknown ARN.
//   lambda:invoke.waitForTaskToken  mint a task token at the local Step Functions endpoint
//                      (tests/support/sfn_endpoint.py), invoke with it in the payload, then
//                      wait until the binary completes it with SendTaskSuccess / Failure, or
//                      until the state's TimeoutSeconds (States.Timeout): see callbackTasks.
//
// Each run records what its handlers saw (every acquire attempt, the lease, releases,
// child runs) and the interpreter's event log, so tests can observe an execution
// (e.g. "it has retried twice") instead of sleeping.
//
// This file is only the entry point the tests, run-workflows.mjs, validate-asl.mjs and
// bench/*.mjs import from; the harness itself is in harness/, one concept a module:
//   definitions.mjs      the definitions with test substitutions, the ARNs, lock names
//   local-stack.mjs      the binaries through the Invoke API, the lock table (DynamoDB)
//   callback-tasks.mjs   .waitForTaskToken: task tokens at the local endpoint, one attempt
//   run-record.mjs       what an execution did (RunRecord) and how it ended (outcomeOf)
//   child-execution.mjs  startExecution.sync:2 (runChildExecution, correctedStatesHash),
//                        aws-sdk:sfn:stopExecution and describeExecution
//   execution.mjs        startExecution / runExecution: the handlers, FAST_RETRIES

export {
  ARNS,
  LOCK_RESULT_PATH,
  RECIPE_DOC,
  STATE_MACHINE_DIR,
  TEST_SUBSTITUTIONS,
  loadDefinition,
  lockedWorkflowFor,
  placeholdersIn,
  queuedWorkflowFor,
  docsRecipe,
  skipIfRunningFor,
  substituteDefinition,
  uniqueLockName,
} from './harness/definitions.mjs';
export {
  acquireAs,
  closeClients,
  expireLock,
  invokeFunction,
  namedError,
  pauseStore,
  readLock,
  releaseAs,
  stackEnv,
  storeDrained,
  warmUp,
} from './harness/local-stack.mjs';
export { closeToken, endpointCalls, injectFault, tokenOutcome } from './harness/callback-tasks.mjs';
export { correctedStatesHash } from './harness/child-execution.mjs';
export { FAST_RETRIES, REAL_PAUSE, runExecution, startExecution, stateMachineFor } from './harness/execution.mjs';
