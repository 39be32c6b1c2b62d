// around() inside around(), or inside a Map's or Parallel's graph: the
// owner is the execution, so both would hold one grant.
import { Construct } from 'constructs';
import type { States } from './states';

export function nestedAround(name: string, state: any, siblings: States): string | undefined {
  const suffix = 'Run Workload Under Lock';
  if (state.Type !== 'Parallel' || !name.endsWith(suffix)) return undefined;
  const prefix = name.slice(0, name.length - suffix.length);
  if (!(`${prefix}Acquire Lock` in siblings)) return undefined;
  return `state "${name}" is the lock's branch of another around() inside this chain: `
    + OWNER_IS_THE_EXECUTION;
}

const OWNER_IS_THE_EXECUTION = "a lock's owner is the execution, so around() inside around(), a Map's item processor or "
  + "a Parallel's branch would share one grant (iterations and branches would all hold it at once, and the first release "
  + 'would free it under the others); use around() at the top level of the state machine only, and for a lock per item '
  + 'start a child state machine with around() at its top level (tasks.StepFunctionsStartExecution, RUN_JOB)';

/** Whether the lock's states (found by their construct ids in `scope`) are
 * in a Map's or Parallel's graph rather than a state machine's own. */
export function notAtTopLevel(scope: Construct, prefix: string): string | undefined {
  const acquire = scope.node.tryFindChild(`${prefix}Acquire Lock`) as any;
  // CDK keeps a state's graph, and a branch's or processor's outer graph,
  // in private fields: test/check.test.ts fails if they are renamed.
  const graph = acquire?.containingGraph;
  if (!graph?.superGraph) return undefined;
  return `the lock's states ("${prefix}Acquire Lock", ...) are inside a Map's item processor or a Parallel's branch (or another around()): `
    + OWNER_IS_THE_EXECUTION;
}
