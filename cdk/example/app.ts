// The example app: one Lambda workload run under the lock, as the shipped
// locked workflow runs its sample. Synthesized offline by app.synth() (no
// AWS account, no CDK CLI): `node dist/example/app.js` writes cdk.out/.
import * as path from 'path';
import { App, Duration, Stack, StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { SfnLock, SfnLockProps } from '../lib';
import { acknowledge, nagRef } from '../lib/nag';

export interface ExampleProps extends StackProps {
  /** Where the three bootstrap binaries are (SfnLockProps.codeDirectory). */
  readonly codeDirectory: string;
  readonly onContention?: 'wait' | 'queue' | 'skip';
  /** JSONATA: the JSONata flavour of the lock's states. Default JSONPath. */
  readonly queryLanguage?: sfn.QueryLanguage;
  /** The lock's other settings (the tests vary them). */
  readonly lock?: Partial<SfnLockProps>;
}

export class ExampleStack extends Stack {
  readonly lock: SfnLock;
  readonly stateMachine: sfn.StateMachine;
  readonly workload: lambda.Function;

  constructor(scope: Construct, id: string, props: ExampleProps) {
    super(scope, id, props);
    this.lock = new SfnLock(this, 'Lock', { ...props.lock, codeDirectory: props.codeDirectory });

    const workloadLogs = new logs.LogGroup(this, 'WorkloadLogs', { retention: logs.RetentionDays.ONE_MONTH });
    const workloadRole = new iam.Role(this, 'WorkloadRole', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    workloadRole.addToPolicy(new iam.PolicyStatement({
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [workloadLogs.logGroupArn],
    }));
    // The workload: template.yaml's sample, the same code on the same
    // runtime: returns its input after sleeping sleepSeconds, at most until
    // one second before its own Timeout. That Timeout is within the lock's
    // workloadMaxRun, the longest it may run on after its Task timed out.
    const timeout = Duration.seconds(Math.min(300, this.lock.workloadMaxRun.toSeconds()));
    this.workload = new lambda.Function(this, 'Workload', {
      runtime: lambda.Runtime.PYTHON_3_13,
      handler: 'index.handler',
      code: lambda.Code.fromInline(SAMPLE_WORKLOAD),
      timeout,
      role: workloadRole,
      logGroup: workloadLogs,
    });
    acknowledge(this.workload, [['AwsSolutions-L1',
      "Python 3.13, template.yaml's sample workload runtime, so that both deploy the same sample; the lock's own functions run on provided.al2023."]]);

    const definition = this.lock.around(
      this.lock.lambdaWorkload(this, this.workload, { timeout, queryLanguage: props.queryLanguage }),
      { lockName: 'example', workloadTimeout: timeout, onContention: props.onContention ?? 'wait', queryLanguage: props.queryLanguage },
    );
    const logGroup = new logs.LogGroup(this, 'StateMachineLogs', {
      logGroupName: `/aws/vendedlogs/states/${this.stackName}-locked`,
      retention: logs.RetentionDays.ONE_MONTH,
    });
    this.stateMachine = new sfn.StateMachine(this, 'Locked', {
      definitionBody: sfn.DefinitionBody.fromChainable(definition),
      queryLanguage: props.queryLanguage,
      // No execution timeout: the states are bounded instead, so that a wait
      // that runs out ends in LockWaitTimeout (docs/failures.md).
      logs: { destination: logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false },
      tracingEnabled: true,
    });
    this.lock.register(this.stateMachine, { logGroup });
    // What CDK grants the state machine's role beside register()'s.
    acknowledge(this.stateMachine.role, [
      [`AwsSolutions-IAM5[Resource::${nagRef(this.workload, 'Arn')}:*]`,
        "CDK's LambdaInvoke grants every version of the workload (ARN:*), so that a qualified ARN may be invoked too."],
      ['AwsSolutions-IAM5[Resource::*]',
        'X-Ray tracing and CloudWatch Logs delivery (xray:PutTraceSegments, logs:CreateLogDelivery, ...) have no resource-level permissions: "*" is the only Resource they accept.'],
    ]);
  }
}

const SAMPLE_WORKLOAD = `import math
import time


def handler(event, context):
    requested = event.get("sleepSeconds", 0) if isinstance(event, dict) else 0
    try:
        seconds = float(requested)
    except (TypeError, ValueError):
        seconds = 0.0
    if not math.isfinite(seconds) or seconds < 0:
        seconds = 0.0
    remaining = context.get_remaining_time_in_millis() / 1000.0 - 1.0
    time.sleep(max(0.0, min(seconds, remaining)))
    return event
`;

if (require.main === module) {
  const codeDirectory = process.env.SFN_LOCK_CODE_DIR ?? path.join(__dirname, '..', '..', '..', 'target', 'lambda');
  const app = new App({ outdir: process.env.CDK_OUTDIR ?? 'cdk.out' });
  // Optional settings as CDK context (`cdk synth -c sfn-lock:cleanupDelaySeconds=20`,
  // or CDK_CONTEXT_JSON): the deployed tier shortens the sweep's waits and
  // deploys the queue and skip modes beside the wait mode.
  const seconds = (key: string) => {
    const v = app.node.tryGetContext(`sfn-lock:${key}`);
    return v === undefined ? undefined : Duration.seconds(Number(v));
  };
  new ExampleStack(app, app.node.tryGetContext('sfn-lock:stackName') ?? 'SfnLockExample', {
    codeDirectory,
    onContention: app.node.tryGetContext('sfn-lock:onContention'),
    env: { account: process.env.CDK_DEFAULT_ACCOUNT ?? '123456789012', region: process.env.CDK_DEFAULT_REGION ?? 'eu-west-1' },
    lock: { cleanupDelay: seconds('cleanupDelaySeconds'), workloadMaxRun: seconds('workloadMaxRunSeconds') },
  });
  const assembly = app.synth();
  console.log(`synthesized ${assembly.stacks.map((s) => s.templateFile).join(', ')} into ${assembly.directory}`);
}
