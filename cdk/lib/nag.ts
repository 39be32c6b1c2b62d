// cdk-nag suppressions written as the metadata cdk-nag reads ("cdk_nag" on
// each CloudFormation resource), so that the library needs no cdk-nag at run
// time. Every suppression carries its reason; cdk-nag prints it.
import { CfnResource } from 'aws-cdk-lib';
import { IConstruct } from 'constructs';

/** [rule id, reason] pairs, on every resource under `scope`. */
export function suppress(scope: IConstruct, rules: Array<[string, string]>): void {
  for (const c of scope.node.findAll()) {
    if (!CfnResource.isCfnResource(c)) continue;
    const prior = (c.getMetadata('cdk_nag')?.rules_to_suppress ?? []) as Array<{ id: string; reason: string }>;
    const byId = new Map(prior.map((r) => [r.id, r.reason]));
    for (const [id, reason] of rules) byId.set(id, byId.has(id) ? `${byId.get(id)} ${reason}` : reason);
    c.addMetadata('cdk_nag', { rules_to_suppress: [...byId].map(([id, reason]) => ({ id, reason })) });
  }
}
