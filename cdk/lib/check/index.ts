// What around() refuses in the chain it is given: the rules of `sfn-lock
// wrap` (crates/sfn-lock-cli/src/wrap/mod.rs lists them and says why),
// checked at synth time on the chain's states as CDK renders them, one rule
// a file as wrap has them: lock-name.ts (wrap's --lock-name-path and
// jsonata_path.rs), nesting.ts, variables.ts (check.rs), timing.ts
// (timing.rs), errors.ts (errors.rs), tolerated.ts (tolerated.rs) and
// unwaited.ts (unwaited.rs), over states.ts (states.rs) and arn.ts. Each
// refusal is an Error naming the state and what to do (cdk/README.md, "What
// around() refuses"). The lock's Parallel catches every error out of the
// chain and holds the lock workloadMaxRun before it releases, so what is
// refused is what would end the chain, or let it end, while work it started
// may still run: the lock would then be released under that work.
import { Stack } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { AroundOptions, LockCalls } from '../around';
import { unsafeRetryCatch } from './errors';
import { lockNameRefusal } from './lock-name';
import { nestedAround, notAtTopLevel } from './nesting';
import { chainStates, first } from './states';
import { branchBound, timing } from './timing';
import { toleratedFailures } from './tolerated';
import { unwaitedWork } from './unwaited';
import { lockVariables } from './variables';

/** The refusals of around(): throws the first, as wrap does (the first
 * offender by state name, depth first), and checks again at synth time
 * (states may still get a Retry or a Catch after around()), with whether
 * the lock's states ended up at the top level of their state machine. */
export function checkAround(scope: Construct, work: sfn.IChainable, o: AroundOptions, calls: LockCalls): void {
  const refusal = refuse(work, o, calls);
  if (refusal) throw new Error(`around: ${refusal}`);
  scope.node.addValidation({
    validate: () => {
      const errors: string[] = [];
      const again = refuse(work, o, calls);
      if (again) errors.push(`around: ${again}`);
      const nested = notAtTopLevel(scope, o.prefix ?? '');
      if (nested) errors.push(`around: ${nested}`);
      return errors;
    },
  });
}

/** The first refusal for the chain `work` with the options `o`, if any. */
function refuse(work: sfn.IChainable, o: AroundOptions, calls: LockCalls): string | undefined {
  const stack = Stack.of(work.startState);
  const states = chainStates(work, o.queryLanguage);
  return lockNameRefusal(o)
    ?? first(states, (name, state, siblings) => nestedAround(name, state, siblings))
    ?? first(states, (name, state) => lockVariables(name, state))
    ?? first(states, (name, state) => timing(name, state, o.workloadTimeout.toSeconds(), calls))
    ?? branchBound(work.startState.stateId, states, o.workloadTimeout.toSeconds())
    ?? first(states, (name, state, siblings) => unsafeRetryCatch(name, state, siblings, stack)
      ?? toleratedFailures(name, state) ?? unwaitedWork(name, state));
}
