// cdk-nag findings acknowledged through aws-cdk-lib's own Validations API,
// so the library needs no cdk-nag at run time. Each acknowledgment names the
// exact finding (cdk-nag 3 has no prefix match) and says why; cdk-nag's
// report and the construct metadata keep the reason.
import { CfnElement, Stack, Validations } from 'aws-cdk-lib';
import { IConstruct } from 'constructs';

/** Acknowledge AwsSolutions findings on `scope` and everything under it. */
export function acknowledge(scope: IConstruct, findings: Array<[string, string]>): void {
  for (const [id, reason] of findings) {
    Validations.of(scope).acknowledge({ id: `AwsSolutions::${id}`, reason });
  }
}

/** How cdk-nag writes a resource's attribute in a finding: <LogicalId.Attr>. */
export function nagRef(resource: IConstruct, attribute: string): string {
  const element = resource.node.defaultChild as CfnElement;
  return `<${Stack.of(resource).getLogicalId(element)}.${attribute}>`;
}
