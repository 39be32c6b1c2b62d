// The crash-safety sweep (docs/failures.md, "Crash safety"): an execution of
// a registered state machine ends -> EventBridge rule -> SQS delay queue ->
// event source mapping -> release-execution-locks, which asks Step Functions
// whether it really ended and frees what it still holds after the grace. And
// the reconciler: EventBridge Scheduler invokes the same function on a
// schedule for an end event that never came. As template.yaml wires them.
import { Aws, Duration, Fn, Lazy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { allow, allowTaskTokens } from './grants';
import { acknowledge, nagRef } from './nag';

export interface SweepProps {
  /** The delay queue's DelaySeconds: the sweep's first look after an end,
   * past any acquire still in flight (acquire-lock's timeout is 18 s).
   * Default 900 s (SQS's maximum), 20 s to 900 s. */
  readonly cleanupDelay?: Duration;
  /** EventBridge Scheduler rate(...) or cron(...) for the reconciler;
   * '' for none (the lease stays the bound). Default 'rate(5 minutes)'. */
  readonly reconcileSchedule?: string;
}

interface Props extends SweepProps {
  readonly fn: lambda.Function;
  readonly table: dynamodb.ITable;
}

export class Sweep extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly rule: events.Rule;
  readonly fn: lambda.Function;
  private readonly arns: string[] = [];
  private readonly names: string[] = [];

  constructor(scope: Construct, id: string, props: Props) {
    super(scope, id);
    const fn = (this.fn = props.fn);
    const delay = (props.cleanupDelay ?? Duration.seconds(900)).toSeconds();
    if (delay < 20 || delay > 900) throw new Error(`SfnLock: cleanupDelay must be 20 to 900 s, got ${delay}`);

    // Events EventBridge could not deliver and messages the function failed
    // on five times; alarm on its depth.
    this.deadLetterQueue = new sqs.Queue(this, 'CleanupDeadLetterQueue', {
      retentionPeriod: Duration.seconds(1209600),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.queue = new sqs.Queue(this, 'CleanupQueue', {
      deliveryDelay: Duration.seconds(delay),
      // Six times the function's timeout, as Lambda recommends for SQS sources.
      visibilityTimeout: Duration.seconds(6 * (fn.timeout?.toSeconds() ?? 3)),
      retentionPeriod: Duration.seconds(345600),
      // SQS managed keys: EventBridge cannot send to a queue under the AWS
      // managed KMS key (its key policy cannot grant events.amazonaws.com).
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: 5 },
    });

    const e = (p: string) => events.EventField.fromPath(p);
    this.rule = new events.Rule(this, 'ExecutionEndedRule', {
      description: "An execution of a state machine that takes sfn-lock's locks ended; sweep the locks it may still hold.",
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: {
          status: ['ABORTED', 'TIMED_OUT', 'FAILED', 'SUCCEEDED'],
          stateMachineArn: Lazy.list({ produce: () => this.arns }),
        },
      },
    });
    // Only what the sweep reads: the event's execution input and output must
    // not sit in the queues for days.
    this.rule.addTarget(new targets.SqsQueue(this.queue, {
      message: events.RuleTargetInput.fromObject({
        'version': '0', 'id': e('$.id'), 'detail-type': 'Step Functions Execution Status Change',
        'source': 'aws.states', 'account': e('$.account'), 'time': e('$.time'), 'region': e('$.region'),
        'resources': [e('$.detail.executionArn')],
        'detail': {
          executionArn: e('$.detail.executionArn'),
          stateMachineArn: e('$.detail.stateMachineArn'),
          status: e('$.detail.status'),
        },
      }),
      retryAttempts: 185,
      maxEventAge: Duration.seconds(86400),
      deadLetterQueue: this.deadLetterQueue,
    }));

    new lambda.EventSourceMapping(this, 'ReleaseExecutionLocksEventSourceMapping', {
      target: fn,
      eventSourceArn: this.queue.queueArn,
      batchSize: 10,
      enabled: true,
      // A record that keeps failing holds up only itself, not its batch.
      reportBatchItemFailures: true,
    });
    // The event source mapping's needs, on this queue only.
    allow(fn, 'ConsumeTheCleanupQueue', [
      'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes',
    ], [this.queue.queueArn]);
    // An event that came before the workload can have stopped goes back with a delay.
    allow(fn, 'DeferEarlyEvents', ['sqs:SendMessage'], [this.queue.queueArn]);
    const t = props.table.tableArn;
    allow(fn, 'FindLocksByOwner', ['dynamodb:Query'], [`${t}/index/owner-index`]);
    allow(fn, 'ReconcilerScansTheTable', ['dynamodb:Scan'], [t]);
    allow(fn, 'ReleaseLocksInThisTable', ['dynamodb:UpdateItem'], [t]);
    allow(fn, 'ReadSemaphorePermitMarkers', ['dynamodb:GetItem'], [t]);
    allow(fn, 'DeleteSemaphorePermitMarkers', ['dynamodb:DeleteItem'], [t]);
    allowTaskTokens(fn, 'HandOffToQueuedWaiters');
    // The sweep trusts Step Functions, not the message: only the registered
    // state machines' executions.
    fn.addToRolePolicy(new iam.PolicyStatement({
      sid: 'ConfirmTheExecutionEnded', actions: ['states:DescribeExecution'],
      resources: Lazy.list({ produce: () => this.names.map(executionArns) }),
    }));
    fn.addEnvironment('SWEPT_STATE_MACHINE_ARNS', Lazy.string({ produce: () => (this.arns.length ? Fn.join(',', this.arns) : '') }));
    fn.addEnvironment('CLEANUP_QUEUE_URL', this.queue.queueUrl);

    const schedule = props.reconcileSchedule ?? 'rate(5 minutes)';
    if (schedule !== '') this.reconciler(schedule);
    this.node.addValidation({
      // The function refuses an empty SWEPT_STATE_MACHINE_ARNS and a rule
      // needs a pattern to match.
      validate: () => (this.arns.length === 0 ? ['SfnLock: no state machine registered; call lock.register(stateMachine)'] : []),
    });
  }

  get count(): number { return this.arns.length; }

  add(stateMachine: sfn.IStateMachine): void {
    this.arns.push(stateMachine.stateMachineArn);
    // DescribeExecution authorizes on the execution's ARN, which holds the
    // machine's name: arn:...:execution:NAME:ID.
    if (!(stateMachine instanceof sfn.StateMachine)) {
      this.names.push(Fn.select(6, Fn.split(':', stateMachine.stateMachineArn)));
    } else {
      this.names.push(stateMachine.stateMachineName);
      acknowledge(this.fn, [[
        `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:${nagRef(stateMachine, 'Name')}:*]`,
        'states:DescribeExecution on every execution of a registered state machine (execution:NAME:*): the sweep confirms that the execution named in an end event has ended before it frees its locks.']]);
    }
  }

  private reconciler(expression: string) {
    if (!/^(rate|cron)\(.+\)$/.test(expression)) {
      throw new Error(`SfnLock: reconcileSchedule must be rate(...) or cron(...), got ${expression}`);
    }
    // Asynchronous and not retried: the next run looks at everything again.
    this.fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.seconds(300) });
    const role = new iam.Role(this, 'ReconcilerScheduleRole', {
      description: 'Assumed by EventBridge Scheduler (this account\'s schedules only) to invoke the sweep function as the reconciler.',
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
    });
    role.addToPolicy(new iam.PolicyStatement({
      sid: 'InvokeTheSweepFunction', actions: ['lambda:InvokeFunction'], resources: [this.fn.functionArn],
    }));
    const group = new scheduler.CfnScheduleGroup(this, 'ReconcilerScheduleGroup', {});
    new scheduler.CfnSchedule(this, 'ReconcilerSchedule', {
      description: 'sfn-lock: the reconciler, release-execution-locks on a schedule.',
      groupName: group.ref,
      scheduleExpression: expression,
      flexibleTimeWindow: { mode: 'OFF' },
      state: 'ENABLED',
      target: {
        arn: this.fn.functionArn,
        roleArn: role.roleArn,
        input: '{"sfnLockReconcile": {}}',
        retryPolicy: { maximumEventAgeInSeconds: 300, maximumRetryAttempts: 2 },
      },
    });
  }
}

// NAME -> arn:...:execution:NAME:* (every execution of it).
function executionArns(name: string): string {
  return `arn:${Aws.PARTITION}:states:${Aws.REGION}:${Aws.ACCOUNT_ID}:execution:${name}:*`;
}
