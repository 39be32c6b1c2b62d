export { SfnLock, SfnLockProps } from './sfn-lock';
export { AroundOptions, OnContention } from './around';
// The sample workload only as lock.lambdaWorkload(), which checks its Timeout.
export { LambdaWorkloadOptions } from './workload';
export { Sweep, SweepProps } from './sweep';
export * as errors from './errors';
