// A Map that tolerates failed items (tolerated.rs): an item whose work may
// still run counts as tolerated, and the Map succeeds under it.

const TOLERANCE_REMEDY = 'set it to 0 (or remove it) so that a failed item fails the Map and the lock\'s '
  + 'own states hold the lock until the work has stopped, and handle failed items inside the item '
  + 'processor, retrying or catching only errors after which the work did not start or has ended';

export function toleratedFailures(name: string, state: any): string | undefined {
  for (const field of ['ToleratedFailureCount', 'ToleratedFailurePercentage']) {
    const value = state[field];
    let tolerance: string | undefined;
    if (value !== undefined && value !== 0) tolerance = `${field} ${JSON.stringify(value)}`;
    else if (state[`${field}Path`] !== undefined) {
      tolerance = `${field}Path ${JSON.stringify(state[`${field}Path`])}, which may be above 0 at run time`;
    }
    if (tolerance) {
      return `state "${name}" has ${tolerance}: an item that fails while its work may still run (States.Timeout, `
        + 'States.HeartbeatTimeout, a Lambda service error, or one piece failing beside others) counts as tolerated, the Map '
        + `succeeds, and the lock is released when your states end while that work may run on; ${TOLERANCE_REMEDY}`;
    }
  }
  return undefined;
}
