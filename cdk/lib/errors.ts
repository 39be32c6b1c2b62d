// The error names of the shipped definitions (statemachine/*.asl.json), in
// their order. test/equivalence.test.ts compares what around() renders with
// those files, so a name added there and not here (or the reverse) fails.

/** Lambda's own errors after which the call may have run, or never ran:
 * retried on the lock calls, whose repeat by the same owner is harmless. */
export const LAMBDA_TRANSIENT = [
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.TooManyRequestsException',
  'Lambda.Unknown',
  'Sandbox.Timedout',
  'Runtime.ExitError',
  'Runtime.OutOfMemory',
];

/** Retried by every acquire and release: the store's hiccup, then Lambda's. */
export const TRANSIENT = ['LockStoreUnavailable', ...LAMBDA_TRANSIENT];

/** Caught after an acquire: each may hide a grant that landed without its
 * answer, so the execution releases before it fails. */
export const ACQUIRE_CAUGHT = ['LockStoreUnavailable', 'LockStoreMisconfigured', ...LAMBDA_TRANSIENT];

/** The queued acquire also catches its own LockWaitTimeout: a hand-off may
 * have come as the wait ran out. */
export const QUEUED_ACQUIRE_CAUGHT = ['LockStoreUnavailable', 'LockStoreMisconfigured', 'LockWaitTimeout', ...LAMBDA_TRANSIENT];

/** The sample workload Task's first catcher: errors after which its one
 * invocation may still run (the state ended, not the function), so the
 * lock is held (docs/failures.md). */
export const WORKLOAD_MAY_RUN_ON = [
  'States.Timeout',
  'States.HeartbeatTimeout',
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.SdkClientException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
];
