// A Task that starts work it does not wait for (unwaited.rs): its state
// succeeds once the work has started, so the chain may end under it.
import { integration } from './arn';

/** unwaited.rs' SYNC_FORMS: optimized integrations that start work and have a
 * .sync form that waits for it. */
const SYNC_FORMS = [
  'athena:startQueryExecution', 'batch:submitJob', 'bedrock:createModelCustomizationJob',
  'codebuild:retryBuildBatch', 'codebuild:startBuild', 'codebuild:startBuildBatch',
  'databrew:startJobRun', 'ecs:runTask', 'eks:runJob', 'elasticmapreduce:addStep',
  'elasticmapreduce-containers:startJobRun', 'emr-serverless:startJobRun', 'glue:startJobRun',
  'mediaconvert:createJob', 'sagemaker:createHyperParameterTuningJob', 'sagemaker:createLabelingJob',
  'sagemaker:createProcessingJob', 'sagemaker:createTrainingJob', 'sagemaker:createTransformJob',
  'states:startExecution',
];

const INVOKE_REMEDY = 'invoke it synchronously (InvocationType RequestResponse, the default: no '
  + 'invocationType on tasks.LambdaInvoke), or use IntegrationPattern.WAIT_FOR_TASK_TOKEN and have the '
  + 'function send the token back when its work is done';
const SYNC_REMEDY = 'use its .sync form (integrationPattern: sfn.IntegrationPattern.RUN_JOB, or .sync:2, '
  + 'or WAIT_FOR_TASK_TOKEN where the service offers it), which waits until the work has ended';
const SDK_REMEDY = "use the service's optimized integration with .sync if it has one (integrationPattern: "
  + 'sfn.IntegrationPattern.RUN_JOB), or .waitForTaskToken with the work sending the token back when it is done';

export function unwaitedWork(name: string, state: any): string | undefined {
  if (state.Type !== 'Task') return undefined;
  const call = integration(state.Resource);
  // A task token is sent back when the work is done: it waits.
  if (!call || call.pattern) return undefined;
  let what: string;
  let remedy: string;
  // lambda:invoke and its AWS SDK form aws-sdk:lambda:invoke alike (unwaited.rs).
  if (call.service === 'lambda' && call.action === 'invoke') {
    const args = state.Parameters ?? state.Arguments;
    let invocation: string | undefined;
    if (args !== undefined && (typeof args !== 'object' || args === null)) invocation = 'at run time';
    else if (args && 'InvocationType.$' in args) invocation = 'at run time';
    else if (args && typeof args.InvocationType === 'string') {
      invocation = /^\s*\{%/.test(args.InvocationType) ? 'at run time' : args.InvocationType;
    } else if (args && args.InvocationType !== undefined) invocation = 'at run time';
    if (invocation === undefined || invocation === 'RequestResponse' || invocation === 'DryRun') return undefined;
    what = invocation === 'at run time'
      ? 'a Lambda invoke whose InvocationType is chosen at run time (InvocationType.$, or a JSONata expression), which may '
        + 'be Event: the function runs on after its state ended'
      : `an asynchronous Lambda invoke (InvocationType ${invocation}), whose state ends once the function is queued, while it runs on`;
    remedy = INVOKE_REMEDY;
  } else if (!call.sdk && SYNC_FORMS.includes(`${call.service}:${call.action}`)) {
    what = `a Task on "${state.Resource}", which starts ${call.service}:${call.action} without .sync: its state ends once the work has started`;
    remedy = SYNC_REMEDY;
  } else if (call.sdk && startsWork(call.service, call.action)) {
    what = `a Task on "${state.Resource}", an AWS SDK action that starts work and returns (AWS SDK integrations have no .sync): `
      + 'its state ends once the work has started';
    remedy = SDK_REMEDY;
  } else {
    return undefined;
  }
  return `state "${name}" is ${what}: when your states then succeed, the lock would be released while that work runs on; ${remedy}`;
}

/** Whether an AWS SDK action is named like one that starts work. */
function startsWork(service: string, action: string): boolean {
  if (service === 'sfn' && action === 'startSyncExecution') return false;
  return action.startsWith('start') || action.startsWith('run') || action.startsWith('submit')
    || (action.startsWith('create') && action.endsWith('Job')) || action.endsWith('Async');
}
