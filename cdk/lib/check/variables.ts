// Variables (check.rs: the lock states' own start with sfnLock), which the
// chain's states must leave alone.

export function lockVariables(name: string, state: any): string | undefined {
  const assigns = [state.Assign, ...(Array.isArray(state.Catch) ? state.Catch.map((c: any) => c?.Assign) : [])];
  for (const assign of assigns) {
    if (!assign || typeof assign !== 'object') continue;
    const variable = Object.keys(assign).find((key) => key.startsWith('sfnLock'));
    if (variable) {
      return `state "${name}" assigns the variable $${variable.replace(/\.\$$/, '')}; variables whose name starts with sfnLock `
        + "are the lock states' own: rename it";
    }
  }
  return undefined;
}
