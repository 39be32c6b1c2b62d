// What the tests share: the example stack synthesized offline, its state
// machine definition as JSON, the shipped definitions with their
// placeholders filled with the example's numbers, and template.yaml.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as YAML from 'yaml';
import { ExampleStack, ExampleProps } from '../example/app';

export const REPO = path.resolve(__dirname, '..', '..', '..');

/** A directory shaped as `cargo lambda build --release` leaves target/lambda/.
 * Synthesis hashes and copies an asset, it never runs it: the binaries'
 * behaviour is tested by the Rust suites and the e2e runs, not here. */
export function codeDirectory(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sfn-lock-cdk-code-'));
  for (const binary of ['acquire-lock', 'release-lock', 'release-execution-locks']) {
    fs.mkdirSync(path.join(dir, binary));
    // Distinct content, as real binaries have: CDK stores identical assets once.
    fs.writeFileSync(path.join(dir, binary, 'bootstrap'), `#!/bin/sh\n# stands in for ${binary}\n`, { mode: 0o755 });
  }
  return dir;
}

const env = { account: '123456789012', region: 'eu-west-1' };

/** The example stack, not yet synthesized (constructs may still be added). */
export function exampleStack(props: Partial<ExampleProps> = {}): ExampleStack {
  return new ExampleStack(new App(), 'Example', { codeDirectory: codeDirectory(), env, ...props });
}

export function example(props: Partial<ExampleProps> = {}): { stack: ExampleStack; template: Template } {
  const stack = exampleStack(props);
  return { stack, template: Template.fromStack(stack) };
}

export function emptyStack(): Stack {
  return new Stack(new App(), 'Test', { env });
}

/** A state machine's definition (the one whose logical id starts with
 * `id`), each CloudFormation reference replaced by the shipped files'
 * placeholder for it. */
export function definitionOf(template: Template, id = 'Locked'): any {
  const machines = template.findResources('AWS::StepFunctions::StateMachine');
  const machine = Object.entries(machines).find(([logicalId]) => logicalId.startsWith(id))?.[1] as any;
  if (!machine) throw new Error(`definitionOf: no state machine ${id}*`);
  const resources = template.toJSON().Resources;
  const name = (ref: string): string => {
    if (ref === 'AWS::Partition') return '${Partition}';
    if (/^LockAcquireLockFunctionCurrentVersion/.test(ref)) return '${AcquireLockFunctionArn}';
    if (/^LockReleaseLockFunctionCurrentVersion/.test(ref)) return '${ReleaseLockFunctionArn}';
    if (resources[ref]?.Type === 'AWS::Lambda::Function') return '${WorkloadFunctionArn}';
    throw new Error(`definitionOf: unexpected reference ${ref}`);
  };
  const text = (part: any): string => {
    if (typeof part === 'string') return part;
    if (part.Ref) return name(part.Ref);
    if (part['Fn::GetAtt']) return name(part['Fn::GetAtt'][0]);
    throw new Error(`definitionOf: unexpected part ${JSON.stringify(part)}`);
  };
  const body = machine.Properties.DefinitionString;
  const joined = typeof body === 'string' ? body : body['Fn::Join'][1].map(text).join('');
  return JSON.parse(joined);
}

/** The example's numbers, for the shipped files' numeric placeholders. */
export const NUMBERS: Record<string, string> = {
  LockLimit: '1', MaxWaitSeconds: '3600', WorkloadTimeoutSeconds: '300',
  WorkloadMaxRunSeconds: '900', LeaseMarginSeconds: '300', LockResultPath: 'null',
  LockName: 'example',
};

/** statemachine/NAME.asl.json with the numbers above; the ARNs stay as
 * their placeholders, as definitionOf() names the example's. */
export function shipped(name: string, dir = path.join(REPO, 'statemachine')): any {
  const text = fs.readFileSync(path.join(dir, `${name}.asl.json`), 'utf8');
  return JSON.parse(text.replace(/\$\{(\w+)\}/g, (whole, key) => NUMBERS[key] ?? whole));
}

/** template.yaml read as data; its short tags (!Ref, !If, ...) dropped, the
 * values under them kept: enough for keys, Sids and actions. */
export function samTemplate(): any {
  const src = fs.readFileSync(path.join(REPO, 'template.yaml'), 'utf8');
  return YAML.parse(src, { logLevel: 'silent' });
}

/** Code facts (contract/code-facts.json): the variables each binary reads. */
export function codeFacts(): any {
  return JSON.parse(fs.readFileSync(path.join(REPO, 'contract', 'code-facts.json'), 'utf8'));
}
