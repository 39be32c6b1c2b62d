// The lock's name and the query language (wrap: --lock-name-path,
// jsonata_path.rs): the release states run after the chain, so the name must
// come from what they see alike, the execution's input in the context object.
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { AroundOptions } from '../around';

export function lockNameRefusal(o: AroundOptions): string | undefined {
  const jsonata = o.queryLanguage === sfn.QueryLanguage.JSONATA;
  const name = o.lockName;
  if (sfn.JsonPath.isEncodedJsonPath(name)) {
    const path: string = (sfn.FieldUtils.renderObject({ lockName: name }) as any)['lockName.$'];
    if (jsonata) {
      return `lockName is the JsonPath ${JSON.stringify(path)} but queryLanguage is JSONATA, whose states take no JsonPath: `
        + "write it as a JSONata expression of the context object, such as '{% $states.context.Execution.Input.customerId %}'";
    }
    // Every path must be in the context object ($$.): the release states
    // run after the chain, and their input ($) is the chain's output.
    // ... and in its execution input: every other context field ($$.State...)
    // differs between the acquire and the releases.
    const contextFields: string[] = path.match(/\$\$[.\w]*/g) ?? [];
    if (path.replace(/\$\$/g, '').includes('$') || !contextFields.every((f) => f.startsWith('$$.Execution.Input'))) {
      return `lockName is the JsonPath ${JSON.stringify(path)}, which reads the state's input: the release states see your `
        + "chain's output, not the execution's input, so they would release another name; read it from the context object, "
        + "such as sfn.JsonPath.stringAt('$$.Execution.Input.customerId')";
    }
    return undefined;
  }
  const expression = /^\s*\{%/.test(name);
  if (expression && !jsonata) {
    return `lockName ${JSON.stringify(name)} is a JSONata expression but queryLanguage is JSONPath (the default), which would `
      + "take it as a literal name: give queryLanguage: sfn.QueryLanguage.JSONATA, or a JsonPath such as sfn.JsonPath.stringAt('$$.Execution.Input.customerId')";
  }
  if (expression && /\$states\.(input|result|errorOutput)\b/.test(name)) {
    return `lockName ${JSON.stringify(name)} reads the state's input or result: the release states see your chain's output, `
      + "not the execution's input, so they would release another name; read it from the context object, such as "
      + "'{% $states.context.Execution.Input.customerId %}'";
  }
  return undefined;
}
