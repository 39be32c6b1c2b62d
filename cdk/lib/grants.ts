// The lock functions' grants, each a statement with template.yaml's Sid.
import { Aws } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { acknowledge } from './nag';

export function allow(fn: lambda.Function, sid: string, actions: string[], resources: string[]) {
  fn.addToRolePolicy(new iam.PolicyStatement({ sid, actions, resources }));
}

// states:SendTaskSuccess has no resource type: "*" is the only Resource it
// accepts; the task token names the one task. Held to this Region.
export function allowTaskTokens(fn: lambda.Function, sid: string) {
  fn.addToRolePolicy(new iam.PolicyStatement({
    sid, actions: ['states:SendTaskSuccess'], resources: ['*'],
    conditions: { StringEquals: { 'aws:RequestedRegion': Aws.REGION } },
  }));
  acknowledge(fn.role!, [['AwsSolutions-IAM5[Resource::*]',
    'states:SendTaskSuccess has no resource type, so "*" is the only Resource it accepts; the task token in the request names the one task it completes, and aws:RequestedRegion holds it to this Region (template.yaml, AdmitQueuedWaiters).']]);
}

