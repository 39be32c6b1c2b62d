// The user's Retry and Catch (errors.rs): on an error after which the work
// may still run, they would end the chain, and release the lock, under it.
import { CfnResource, Stack } from 'aws-cdk-lib';
import { WORKLOAD_MAY_RUN_ON } from '../errors';
import { arnParts, integration } from './arn';
import type { States } from './states';

/** The catch-alls that include the errors after which work may still run. */
const CATCH_ALLS = ['States.ALL', 'States.TaskFailed'];

/** The Retry CDK's tasks.LambdaInvoke adds unless retryOnServiceExceptions: false. */
const LAMBDA_INVOKE_DEFAULT_RETRY = [
  'Lambda.ClientExecutionTimeoutException', 'Lambda.ServiceException',
  'Lambda.AWSLambdaException', 'Lambda.SdkClientException',
];

const RETRY_CATCH_REMEDY = "remove it and let the lock's own states handle these errors (they hold the "
  + 'lock until the work has stopped, then fail the execution with the error): retry or catch only errors '
  + 'after which the work did not start or has ended, such as Lambda.TooManyRequestsException, or your own '
  + 'error names; a Catch that only re-raises (its states are Choice, Pass and Fail) may stay';
const LAMBDA_INVOKE_REMEDY = 'set retryOnServiceExceptions: false on this tasks.LambdaInvoke (CDK adds this '
  + 'Retry by default) and retry only Lambda.TooManyRequestsException, as lock.lambdaWorkload() does';
const WAITING_REMEDY = "remove it and let the lock's own states handle these errors (they hold the lock "
  + 'until the work has stopped, then fail the execution with the error); retry inside the job or the '
  + 'worker, or start it again from a new execution';

export function unsafeRetryCatch(name: string, state: any, siblings: States, stack: Stack): string | undefined {
  const sideBySide = state.Type === 'Map' || state.Type === 'Parallel';
  if (!Array.isArray(state.Retry) && !Array.isArray(state.Catch)) return undefined;
  const waits = waitsOn(state, stack);
  for (const field of ['Retry', 'Catch']) {
    // Error names an earlier catcher that only re-raises takes first
    // (catchers are tried in order): they still leave the chain.
    const reraised = new Set<string>();
    const taken = (error: string) => reraised.has(error) || reraised.has('States.ALL');
    for (const entry of Array.isArray(state[field]) ? state[field] : []) {
      const errors: string[] = (Array.isArray(entry?.ErrorEquals) ? entry.ErrorEquals : []).filter((e: unknown) => typeof e === 'string');
      // A retrier with MaxAttempts 0 never retries.
      if (field === 'Retry' && entry.MaxAttempts === 0) continue;
      if (field === 'Catch' && reraises(entry.Next, siblings)) {
        errors.forEach((error) => reraised.add(error));
        continue;
      }
      const unsafe = errors.filter((error) => {
        if (taken(error)) return false;
        if (sideBySide || waits) return true;
        if (WORKLOAD_MAY_RUN_ON.includes(error)) return true;
        // A catch-all after catchers that re-raise every error after which an
        // invocation may still run: only a Lambda invoke's other errors prove
        // it ended (an HTTP or SDK call's need not).
        return CATCH_ALLS.includes(error) && !(isLambdaInvoke(state) && WORKLOAD_MAY_RUN_ON.every(taken));
      });
      if (unsafe.length === 0) continue;
      const on = unsafe.join(', ');
      if (sideBySide) {
        const why = field === 'Retry' ? 'a retry starts the items or branches again beside those still running'
          : 'the Catch lets your states go on, and end, and the lock be released, while they still run';
        return `state "${name}" has a ${field} on ${on}: on a Map or Parallel, any error leaves the invocations of the other `
          + `items or branches running after it (Step Functions stops them as states only), and ${why}; ${RETRY_CATCH_REMEDY}`;
      }
      if (waits) {
        const why = field === 'Retry' ? 'a retry starts it a second time beside the first'
          : 'the Catch lets your states go on, and end, and the lock be released, while it runs';
        return `state "${name}" has a ${field} on ${on}: it waits for ${waits}, and no error of it proves that the work did not `
          + 'start or has ended (the same names come from the call that starts it and from the wait for it), so the work may '
          + `still run, and ${why}; ${WAITING_REMEDY}`;
      }
      const which = unsafe.some((e) => CATCH_ALLS.includes(e)) ? ', which includes States.Timeout and the Lambda service errors,' : ',';
      const why = field === 'Retry'
        ? 'a retry starts a second run beside the first, and the lock is released when your states end, while the first may run on'
        : "the Catch handles the error inside the lock's branch, so the lock's own Catch, which would hold the lock until the "
          + 'work has stopped, never sees it: the lock is released at once while the work may run on';
      const cdkDefault = field === 'Retry' && isLambdaInvoke(state)
        && [...errors].sort().join() === [...LAMBDA_INVOKE_DEFAULT_RETRY].sort().join();
      return `state "${name}" has a ${field} on ${on}${which} after which its work may still be running: ${why}; `
        + (cdkDefault ? LAMBDA_INVOKE_REMEDY : RETRY_CATCH_REMEDY);
    }
  }
  return undefined;
}

/** Whether a catcher going to `next` only re-raises: every state it reaches
 * is a Choice, a Pass that goes on, or a Fail, so the error (or another)
 * still leaves the chain, and the lock's Catch holds the lock. */
function reraises(next: unknown, states: States, path: Set<string> = new Set()): boolean {
  if (typeof next !== 'string' || path.has(next)) return false; // a loop never leaves the chain
  const state = states[next];
  if (!state) return false;
  if (state.Type === 'Fail') return true;
  const after = state.Type === 'Pass' && typeof state.Next === 'string' ? [state.Next]
    : state.Type === 'Choice' ? [state.Default, ...(Array.isArray(state.Choices) ? state.Choices : []).map((c: any) => c?.Next)]
      .filter((n) => n !== undefined)
    : undefined;
  if (!after || after.length === 0) return false;
  const on = new Set(path).add(next);
  return after.every((target) => reraises(target, states, on));
}

/** What a Task waits for outside it, if it does (errors.rs' waits_on). */
function waitsOn(state: any, stack: Stack): string | undefined {
  if (state.Type !== 'Task' || typeof state.Resource !== 'string') return undefined;
  const resource: string = state.Resource;
  if (resource.endsWith('.sync') || resource.endsWith('.sync:2')) return 'a job (.sync)';
  if (resource.endsWith('.waitForTaskToken')) return 'a callback (.waitForTaskToken)';
  const parts = arnParts(resource);
  if (parts[2] === 'states' && parts[5] === 'activity') return "an activity's worker";
  if (isActivityReference(resource, stack)) return "an activity's worker";
  return undefined;
}

/** An activity of this app (tasks.StepFunctionsInvokeActivity renders its
 * ARN as a reference to the AWS::StepFunctions::Activity). */
function isActivityReference(resource: string, stack: Stack): boolean {
  if (!resource.includes('${Token[')) return false;
  const resolved: any = stack.resolve(resource);
  const id = resolved?.Ref ?? resolved?.['Fn::GetAtt']?.[0];
  if (typeof id !== 'string') return false;
  return stack.node.findAll().some((c) => CfnResource.isCfnResource(c)
    && c.cfnResourceType === 'AWS::StepFunctions::Activity' && stack.resolve(c.logicalId) === id);
}

function isLambdaInvoke(state: any): boolean {
  const call = integration(state.Resource);
  return !!call && !call.sdk && call.service === 'lambda' && call.action === 'invoke';
}
