// Two definitions compared modulo state names: each state is renamed by the
// order a fixed walk from StartAt reaches it (Next, then each Catch's target
// in order, each Choice rule's, Default; a Parallel's branches on their own),
// then everything but Comment must be equal: Type, Resource, Parameters,
// Retry and Catch error lists and numbers, targets, timeouts, paths.

type States = Record<string, any>;

function walkOrder(startAt: string, states: States): string[] {
  const order: string[] = [];
  const visit = (name: string | undefined) => {
    if (name === undefined || order.includes(name)) return;
    if (!(name in states)) throw new Error(`no state named ${JSON.stringify(name)}`);
    order.push(name);
    const s = states[name];
    visit(s.Next);
    for (const c of s.Catch ?? []) visit(c.Next);
    for (const c of s.Choices ?? []) visit(c.Next);
    visit(s.Default);
  };
  visit(startAt);
  return order;
}

/** A definition (or a branch) with states named S0, S1, ... by walk order.
 * A state's QueryLanguage equal to the one it inherits is dropped: it changes
 * nothing (CDK writes it on the states of a JSONata machine's branches). */
export function canonical(def: { StartAt: string; States: States; QueryLanguage?: string }, inherited = 'JSONPath'): any {
  const language = def.QueryLanguage ?? inherited;
  const order = walkOrder(def.StartAt, def.States);
  const unreached = Object.keys(def.States).filter((n) => !order.includes(n));
  if (unreached.length) throw new Error(`states never reached: ${unreached.join(', ')}`);
  const rename = (n: string) => `S${order.indexOf(n)}`;
  const states: States = {};
  for (const name of order) {
    const { Comment, ...s } = def.States[name];
    void Comment;
    if (s.QueryLanguage === language) delete s.QueryLanguage;
    if (s.Next) s.Next = rename(s.Next);
    if (s.Default) s.Default = rename(s.Default);
    if (s.Catch) s.Catch = s.Catch.map((c: any) => ({ ...c, Next: rename(c.Next) }));
    if (s.Choices) s.Choices = s.Choices.map((c: any) => ({ ...c, Next: rename(c.Next) }));
    if (s.Branches) s.Branches = s.Branches.map((b: any) => canonical(b, language));
    states[rename(name)] = s;
  }
  return { QueryLanguage: language, StartAt: 'S0', States: states };
}

/** The differences, one line each ("" when none), naming the original
 * states: so a drift says where it is. */
export function differences(expected: any, actual: any): string[] {
  const a = canonical(expected);
  const b = canonical(actual);
  const out: string[] = [];
  if (a.QueryLanguage !== b.QueryLanguage) out.push(`QueryLanguage: expected ${a.QueryLanguage}, got ${b.QueryLanguage}`);
  const names = (def: any) => walkOrder(def.StartAt, def.States);
  const na = names(expected);
  const nb = names(actual);
  const count = Math.max(na.length, nb.length);
  for (let i = 0; i < count; i++) {
    const x = a.States[`S${i}`];
    const y = b.States[`S${i}`];
    const label = `${na[i] ?? '(none)'} / ${nb[i] ?? '(none)'}`;
    if (x === undefined || y === undefined) {
      out.push(`${label}: present on one side only`);
      continue;
    }
    for (const key of new Set([...Object.keys(x), ...Object.keys(y)])) {
      const ex = JSON.stringify(sortKeys(x[key]));
      const ey = JSON.stringify(sortKeys(y[key]));
      if (ex !== ey) out.push(`${label}: ${key}: expected ${ex}, got ${ey}`);
    }
  }
  return out;
}

function sortKeys(v: any): any {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}
