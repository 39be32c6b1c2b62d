export { SfnLock, SfnLockProps } from './sfn-lock';
export { AroundOptions, OnContention } from './around';
export { LambdaWorkloadOptions, lambdaWorkload } from './workload';
export { Sweep, SweepProps } from './sweep';
export * as errors from './errors';
