// The chain's states and the walk over them that every rule shares (wrap's
// states.rs): a file of its own below the rules, so that they need not
// import index.ts, which imports them.
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';

export type States = Record<string, any>;

/** The chain's states (the branch's top level) as CDK renders them, nested
 * ones inside their Parallel's Branches and Map's ItemProcessor. Rendering
 * binds nothing: the states can still be put into the lock's branch. */
export function chainStates(work: sfn.IChainable, queryLanguage?: sfn.QueryLanguage): States {
  const states: States = {};
  for (const state of sfn.State.findReachableStates(work.startState, { includeErrorHandlers: true })) {
    states[state.stateId] = state.toStateJson(queryLanguage);
  }
  return states;
}

type Visit = (name: string, state: any, siblings: States) => string | undefined;

/** The first refusal `visit` finds, by state name, depth first (states.rs'
 * for_each_state: Parallel branches and Map processors included). */
export function first(states: States, visit: Visit): string | undefined {
  for (const name of Object.keys(states).sort()) {
    const state = states[name];
    if (!state || typeof state !== 'object') continue;
    const found = visit(name, state, states);
    if (found) return found;
    const nested = [...(Array.isArray(state.Branches) ? state.Branches : []), state.ItemProcessor ?? state.Iterator]
      .filter((machine) => machine && typeof machine.States === 'object');
    for (const machine of nested) {
      const inner = first(machine.States, visit);
      if (inner) return inner;
    }
  }
  return undefined;
}
