// The lock's resources in the synthesized example, against template.yaml
// (LockStore dynamodb) and contract/code-facts.json: what the binaries read
// and what the template grants them must be what the construct deploys.
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { Match } from 'aws-cdk-lib/assertions';
import { codeFacts, example, samTemplate } from './helpers';

const { template } = example();
const sam = samTemplate();
const resources = template.toJSON().Resources;
const FUNCTIONS = {
  'acquire-lock': { cdk: 'LockAcquireLockFunction', sam: 'AcquireLockFunction', timeout: 18 },
  'release-lock': { cdk: 'LockReleaseLockFunction', sam: 'ReleaseLockFunction', timeout: 26 },
  'release-execution-locks': { cdk: 'LockReleaseExecutionLocksFunction', sam: 'ReleaseExecutionLocksFunction', timeout: 35 },
};

function logicalId(prefix: string, type: string): string {
  const ids = Object.keys(resources).filter((id) => id.startsWith(prefix) && resources[id].Type === type);
  assert.equal(ids.length, 1, `one ${type} named ${prefix}*: ${ids}`);
  return ids[0];
}

test('the table: lockName key, TTL on ttl, sparse owner-index, retained', () => {
  template.hasResource('AWS::DynamoDB::Table', {
    DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain',
    Properties: {
      KeySchema: [{ AttributeName: 'lockName', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
      GlobalSecondaryIndexes: [{ IndexName: 'owner-index', KeySchema: [{ AttributeName: 'owner', KeyType: 'HASH' }], Projection: { ProjectionType: 'KEYS_ONLY' } }],
      SSESpecification: { SSEEnabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      DeletionProtectionEnabled: true,
    },
  });
  const table = sam.Resources.LockTable.Properties;
  assert.deepEqual((Object.values(resources) as any[]).find((r) => r.Type === "AWS::DynamoDB::Table").Properties.KeySchema, table.KeySchema);
});

for (const [binary, f] of Object.entries(FUNCTIONS)) {
  test(`${binary}: provided.al2023 on arm64, template.yaml's timeout and variables, only variables it reads`, () => {
    const fn = resources[logicalId(f.cdk, 'AWS::Lambda::Function')].Properties;
    assert.equal(fn.Runtime, 'provided.al2023');
    assert.equal(fn.Handler, 'bootstrap');
    assert.deepEqual(fn.Architectures, ['arm64']);
    assert.equal(fn.Timeout, f.timeout);
    assert.equal(fn.Timeout, sam.Resources[f.sam].Properties.Timeout);
    const vars = Object.keys(fn.Environment.Variables).sort();
    // MAX_LEASE_SECONDS only when a cap is set, as in template.yaml.
    const samVars = Object.keys(sam.Resources[f.sam].Properties.Environment.Variables).filter((v) => v !== 'MAX_LEASE_SECONDS').sort();
    assert.deepEqual(vars, samVars);
    const reads: string[] = codeFacts().environment[binary];
    assert.deepEqual(vars.filter((v) => !reads.includes(v)), [], 'a variable the binary never reads');
  });
}

test('the variables hold the lock store, the namespace and the sweep settings', () => {
  const env = (prefix: string) => resources[logicalId(prefix, 'AWS::Lambda::Function')].Properties.Environment.Variables;
  const table = logicalId('LockLockTable', 'AWS::DynamoDB::Table');
  assert.deepEqual(env('LockAcquireLockFunction').LOCK_STORE_URL, { 'Fn::Join': ['', ['dynamodb://', { Ref: table }]] });
  assert.deepEqual(env('LockAcquireLockFunction').LOCK_TABLE_NAME, { Ref: table });
  assert.equal(env('LockReleaseExecutionLocksFunction').SWEEP_GRACE_SECONDS, '900');
  // One machine registered: CDK renders the one-element join as its element.
  assert.deepEqual(env('LockReleaseExecutionLocksFunction').SWEPT_STATE_MACHINE_ARNS, { Ref: logicalId('Locked', 'AWS::StepFunctions::StateMachine') });
  assert.deepEqual(env('LockReleaseExecutionLocksFunction').CLEANUP_QUEUE_URL, { Ref: logicalId('LockSweepCleanupQueue', 'AWS::SQS::Queue') });
});

/** Sid -> sorted actions that template.yaml grants a function with the
 * DynamoDB store; the attach variant's and the LockedStateMachineArns
 * statements are template.yaml's alone (register() covers the latter). */
function samGrants(name: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const add = (s: any) => { out[s.Sid] = [s.Action].flat().sort(); };
  for (const policy of sam.Resources[name].Properties.Policies) {
    if (Array.isArray(policy)) {
      if (policy[0] === 'UseDynamoDbStore') policy[1].Statement.forEach(add);
      continue;
    }
    for (const s of policy.Statement) {
      if (!Array.isArray(s)) add(s);
      else if (s[0] === 'HasOwnStateMachines') add(s[1]);
    }
  }
  return out;
}

function cdkGrants(rolePrefix: string): Record<string, string[]> {
  const role = logicalId(rolePrefix, 'AWS::IAM::Role');
  const out: Record<string, string[]> = {};
  for (const r of Object.values(resources) as any[]) {
    if (r.Type !== 'AWS::IAM::Policy' || !r.Properties.Roles.some((x: any) => x.Ref === role)) continue;
    for (const s of r.Properties.PolicyDocument.Statement) out[s.Sid] = [s.Action].flat().sort();
  }
  return out;
}

for (const [binary, f] of Object.entries(FUNCTIONS)) {
  test(`${binary}: template.yaml's statements, Sid for Sid, plus its own log group`, () => {
    const role = f.cdk.replace('Function', 'Role');
    assert.deepEqual(cdkGrants(role), { ...samGrants(f.sam), WriteItsOwnLogs: ['logs:CreateLogStream', 'logs:PutLogEvents'] });
  });
}

test('no wildcard action, and "*" only for the task-token action', () => {
  for (const r of Object.values(resources) as any[]) {
    if (r.Type !== 'AWS::IAM::Policy') continue;
    for (const s of r.Properties.PolicyDocument.Statement) {
      assert.ok([s.Action].flat().every((a: string) => !a.includes('*')) || /Locked/.test(JSON.stringify(r.Properties.Roles)), JSON.stringify(s));
      if ([s.Resource].flat().includes('*') && !/Locked/.test(JSON.stringify(r.Properties.Roles))) {
        assert.deepEqual(s.Action, 'states:SendTaskSuccess');
        assert.ok(s.Condition.StringEquals['aws:RequestedRegion']);
      }
    }
  }
});

test('the sweep: rule on the registered machines -> delay queue -> mapping -> function', () => {
  const queue = logicalId('LockSweepCleanupQueue', 'AWS::SQS::Queue');
  const dlq = logicalId('LockSweepCleanupDeadLetterQueue', 'AWS::SQS::Queue');
  template.hasResourceProperties('AWS::Events::Rule', {
    EventPattern: {
      'source': ['aws.states'],
      'detail-type': ['Step Functions Execution Status Change'],
      'detail': { status: ['ABORTED', 'TIMED_OUT', 'FAILED', 'SUCCEEDED'], stateMachineArn: [{ Ref: logicalId('Locked', 'AWS::StepFunctions::StateMachine') }] },
    },
    Targets: [Match.objectLike({
      Arn: { 'Fn::GetAtt': [queue, 'Arn'] },
      InputTransformer: Match.objectLike({ InputPathsMap: Match.objectLike({ 'detail-executionArn': '$.detail.executionArn' }) }),
      RetryPolicy: { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86400 },
      DeadLetterConfig: { Arn: { 'Fn::GetAtt': [dlq, 'Arn'] } },
    })],
  });
  // The transformed event carries no execution input or output.
  const rule = Object.values(template.findResources('AWS::Events::Rule'))[0] as any;
  assert.doesNotMatch(rule.Properties.Targets[0].InputTransformer.InputTemplate, /input|output/);
  template.hasResourceProperties('AWS::SQS::Queue', {
    DelaySeconds: 900, VisibilityTimeout: 210, MessageRetentionPeriod: 345600, SqsManagedSseEnabled: true,
    RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [dlq, 'Arn'] }, maxReceiveCount: 5 },
  });
  template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
    EventSourceArn: { 'Fn::GetAtt': [queue, 'Arn'] },
    FunctionName: { Ref: logicalId('LockReleaseExecutionLocksFunction', 'AWS::Lambda::Function') },
    BatchSize: 10, Enabled: true, FunctionResponseTypes: ['ReportBatchItemFailures'],
  });
});

test('the reconciler: a schedule invoking the sweep function, not retried', () => {
  const sweep = logicalId('LockReleaseExecutionLocksFunction', 'AWS::Lambda::Function');
  template.hasResourceProperties('AWS::Scheduler::Schedule', {
    ScheduleExpression: 'rate(5 minutes)',
    Target: Match.objectLike({ Arn: { 'Fn::GetAtt': [sweep, 'Arn'] }, Input: '{"sfnLockReconcile": {}}' }),
  });
  template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 300 });
});

test('versions: the state machine calls published versions, retained', () => {
  template.resourceCountIs('AWS::Lambda::Version', 2);
  for (const v of Object.values(template.findResources('AWS::Lambda::Version')) as any[]) {
    assert.equal(v.DeletionPolicy, 'Retain');
  }
  template.resourcePropertiesCountIs('AWS::Lambda::Alias', { Name: 'live' }, 2);
});

test('alarms: five, each at the first occurrence; the LeftLockToCleanup metric from the machine\'s log', () => {
  template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
  template.allResourcesProperties('AWS::CloudWatch::Alarm', {
    Threshold: 0, EvaluationPeriods: 1, Period: 300, TreatMissingData: 'notBreaching', ComparisonOperator: 'GreaterThanThreshold',
  });
  template.hasResourceProperties('AWS::Logs::MetricFilter', {
    FilterPattern: '{ $.type = "SucceedStateEntered" && ($.details.name = "Succeed And Leave Lock To Cleanup") }',
    MetricTransformations: [Match.objectLike({ MetricName: 'LeftLockToCleanup' })],
  });
});
