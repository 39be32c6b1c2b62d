// Reading a Task's Resource: its ARN's parts (shape.rs) and the service
// integration it names (unwaited.rs). Both errors.ts and unwaited.ts read
// them, so they live below both rather than in either.

export interface Integration { sdk: boolean; service: string; action: string; pattern?: string }

/** The integration `arn:PARTITION:states:::...` names, if it is one. */
export function integration(resource: unknown): Integration | undefined {
  if (typeof resource !== 'string') return undefined;
  const parts = arnParts(resource);
  if (!(parts.length >= 7 && parts[0] === 'arn' && isPartition(parts[1]) && parts[2] === 'states'
    && parts[3] === '' && parts[4] === '')) return undefined;
  const prefix = parts.slice(0, 5).reduce((n, part) => n + part.length + 1, 0);
  let rest = resource.slice(prefix);
  const sdk = rest.startsWith('aws-sdk:');
  if (sdk) rest = rest.slice('aws-sdk:'.length);
  const colon = rest.indexOf(':');
  if (colon < 0) return undefined;
  const service = rest.slice(0, colon);
  const call = rest.slice(colon + 1);
  const dot = call.indexOf('.');
  return dot < 0 ? { sdk, service, action: call } : { sdk, service, action: call.slice(0, dot), pattern: call.slice(dot) };
}

/** The colon-separated parts of an ARN; a `${...}` placeholder (a CDK token
 * such as ${Token[AWS.Partition.8]}) is one opaque piece (shape.rs). */
export function arnParts(arn: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let at = 0;
  while (at < arn.length) {
    if (arn.startsWith('${', at)) {
      const close = arn.indexOf('}', at);
      if (close >= 0) { at = close + 1; continue; }
    }
    if (arn[at] === ':') { parts.push(arn.slice(start, at)); start = at + 1; }
    at += 1;
  }
  parts.push(arn.slice(start));
  return parts;
}

function isPartition(part: string): boolean {
  const placeholder = part.startsWith('${') && part.endsWith('}') && part.split('}').length === 2;
  const named = part.split('-').every((piece, i) => (i === 0 ? piece === 'aws' : /^[a-z0-9]+$/.test(piece)));
  return placeholder || named;
}
