// SfnLock: template.yaml's lock (LockStore dynamodb) as a construct: the
// table, the three functions from prebuilt bootstrap binaries, their
// published versions, the sweep (rule -> delay queue -> mapping -> function),
// the reconciler's schedule and the alarms. Resource settings, Sids and
// environment variables follow template.yaml; its comments say why.
import * as fs from 'fs';
import * as path from 'path';
import { Aws, CfnResource, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { AroundOptions, buildAround } from './around';
import { addAlarms, LeftLockFilter } from './alarms';
import { allow, allowTaskTokens } from './grants';
import { acknowledge, nagRef } from './nag';
import { SweepProps, Sweep } from './sweep';
import { lambdaWorkload, LambdaWorkloadOptions } from './workload';

/** acquire-lock's longest lease (contract/code-facts.json, limits.max_lease_seconds). */
const MAX_LEASE_SECONDS = 31536000;

export interface SfnLockProps extends SweepProps {
  /** A directory with acquire-lock/bootstrap, release-lock/bootstrap and
   * release-execution-locks/bootstrap: `cargo lambda build --release --arm64`
   * writes them to target/lambda/ (cdk/README.md). */
  readonly codeDirectory: string;
  /** Default ARM_64, as template.yaml; the binaries must be built for it. */
  readonly architecture?: lambda.Architecture;
  /** The longest a piece of work runs on after its state ended (a Lambda
   * function's own Timeout): held after an error, in every lease, the
   * sweep's grace. Default 900 s, 30 s to 1 day. */
  readonly workloadMaxRun?: Duration;
  /** Added to every lease; at least 180 s (the held path's retries). Default 300 s. */
  readonly leaseMargin?: Duration;
  /** acquire-lock's lease when a caller gives none (DEFAULT_LEASE_SECONDS). Default 900 s. */
  readonly defaultLease?: Duration;
  /** acquire-lock's longest lease (MAX_LEASE_SECONDS). Default: no cap. */
  readonly maxLease?: Duration;
  /** Metrics per lock name too (METRICS_LOCK_NAME_DIMENSION). Default true. */
  readonly metricsPerLockName?: boolean;
  /** The five alarms (docs/operating.md, "What to watch"). Default true. */
  readonly alarms?: boolean;
  /** SNS topic ARN the alarms notify. Default none. */
  readonly alarmTopicArn?: string;
  readonly logRetention?: logs.RetentionDays;
  /** The table's; default RETAIN: a deleted table drops every held lock and fencing counter. */
  readonly removalPolicy?: RemovalPolicy;
}

export class SfnLock extends Construct {
  readonly table: dynamodb.Table;
  readonly acquireFunction: lambda.Function;
  readonly releaseFunction: lambda.Function;
  /** The published versions the state machines call: an execution keeps the
   * code and settings it started with through an update. */
  readonly acquireVersion: lambda.IVersion;
  readonly releaseVersion: lambda.IVersion;
  readonly sweep: Sweep;
  readonly metricsNamespace: string;
  readonly workloadMaxRun: Duration;
  readonly leaseMargin: Duration;
  private readonly maxLease?: Duration;
  private readonly leftLockStates: string[] = [];
  private arounds = 0;
  /** The machines register() was given. */
  private readonly registered = new Set<sfn.IStateMachine>();

  constructor(scope: Construct, id: string, props: SfnLockProps) {
    super(scope, id);
    this.workloadMaxRun = props.workloadMaxRun ?? Duration.seconds(900);
    this.leaseMargin = props.leaseMargin ?? Duration.seconds(300);
    this.maxLease = props.maxLease;
    checkRange('workloadMaxRun', this.workloadMaxRun, 30, 86400);
    // acquire-lock's own bounds for a lease (template.yaml: 1 to 31536000).
    if (props.defaultLease) checkRange('defaultLease', props.defaultLease, 1, MAX_LEASE_SECONDS);
    if (props.maxLease) checkRange('maxLease', props.maxLease, 1, MAX_LEASE_SECONDS);
    checkRange('leaseMargin', this.leaseMargin, 180, 86400);
    const retention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;

    this.table = new dynamodb.Table(this, 'LockTable', {
      partitionKey: { name: 'lockName', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'ttl',
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
    // Sparse (a released lock has no owner): the sweep finds an ended
    // execution's locks here without a scan.
    this.table.addGlobalSecondaryIndex({
      indexName: 'owner-index',
      partitionKey: { name: 'owner', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.KEYS_ONLY,
    });

    this.metricsNamespace = `sfn-lock/${Aws.STACK_NAME}`;
    const common = {
      LOCK_STORE_URL: `dynamodb://${this.table.tableName}`,
      LOCK_TABLE_NAME: this.table.tableName,
      METRICS_NAMESPACE: this.metricsNamespace,
      METRICS_LOCK_NAME_DIMENSION: props.metricsPerLockName === false ? 'off' : 'on',
    };
    const fn = (name: string, binary: string, timeout: number, description: string, env: Record<string, string>) =>
      lockFunction(this, name, { props, binary, timeout, description, env, retention });

    this.acquireFunction = fn('AcquireLock', 'acquire-lock', 18,
      'Acquires (or renews) a named lock for one owner, on a conditional write to the lock store, or queues a waiting execution.', {
        ...common,
        DEFAULT_LEASE_SECONDS: String((props.defaultLease ?? Duration.seconds(900)).toSeconds()),
        ...(props.maxLease ? { MAX_LEASE_SECONDS: String(props.maxLease.toSeconds()) } : {}),
      });
    const t = this.table.tableArn;
    allow(this.acquireFunction, 'GrantOrRenewLocksInThisTable', ['dynamodb:UpdateItem'], [t]);
    allow(this.acquireFunction, 'WriteSemaphorePermitMarkers', ['dynamodb:PutItem'], [t]);
    allow(this.acquireFunction, 'ReadQueuedWaiters', ['dynamodb:GetItem'], [t]);
    allow(this.acquireFunction, 'DeleteWokenWaiters', ['dynamodb:DeleteItem'], [t]);
    allowTaskTokens(this.acquireFunction, 'AdmitQueuedWaiters');

    this.releaseFunction = fn('ReleaseLock', 'release-lock', 26,
      'Releases a named lock if the given owner still holds it, and hands it to the oldest queued waiter.', common);
    allow(this.releaseFunction, 'ReleaseLocksInThisTable', ['dynamodb:UpdateItem'], [t]);
    allow(this.releaseFunction, 'DeleteSemaphorePermitMarkers', ['dynamodb:DeleteItem'], [t]);
    allow(this.releaseFunction, 'ReadQueuedWaiters', ['dynamodb:GetItem'], [t]);
    allowTaskTokens(this.releaseFunction, 'HandOffToQueuedWaiters');

    this.acquireVersion = this.acquireFunction.currentVersion;
    this.releaseVersion = this.releaseFunction.currentVersion;

    const sweepFunction = fn('ReleaseExecutionLocks', 'release-execution-locks', 35,
      'Releases every lock that an aborted, timed-out or failed execution still owns (fed by the cleanup queue).', {
        ...common,
        SWEEP_GRACE_SECONDS: String(this.workloadMaxRun.toSeconds()),
        // The attach variant is template.yaml's alone; empty as there without it.
        ATTACHED_STATE_MACHINE_ARN: '',
        TARGET_STATE_MACHINE_ARN: '',
      });
    this.sweep = new Sweep(this, 'Sweep', { ...props, fn: sweepFunction, table: this.table });

    if (props.alarms !== false) {
      addAlarms(this, {
        namespace: this.metricsNamespace,
        deadLetterQueue: this.sweep.deadLetterQueue,
        topicArn: props.alarmTopicArn,
      });
    }
    // With nothing registered at all, the sweep says so (lib/sweep.ts); this
    // names each machine that uses the lock without register().
    this.node.addValidation({
      validate: () => this.unregistered().map((id) => `SfnLock: state machine ${id} calls this lock's functions but was not passed to lock.register(): its role cannot call them, and the sweep would not free what its executions leave held`),
    });
  }

  /** The state machines of this stack whose definition calls this lock's
   * acquire function (an around() of this lock) without register(). */
  private unregistered(): string[] {
    const stack = Stack.of(this);
    const acquire = stack.getLogicalId(this.acquireVersion.node.defaultChild as CfnResource);
    return stack.node.findAll()
      .filter((c): c is sfn.StateMachine => c instanceof sfn.StateMachine && !this.registered.has(c))
      .filter((machine) => {
        const cfn = machine.node.defaultChild as sfn.CfnStateMachine;
        // CDK appends the code's hash to a current version's logical id.
        return JSON.stringify(stack.resolve(cfn.definitionString) ?? '').includes(`{"Ref":"${acquire}`);
      })
      .map((machine) => machine.node.path);
  }

  /** The lock's states around a chain (statemachine/*.asl.json as CDK states). */
  around(work: sfn.IChainable, options: AroundOptions): sfn.Chain {
    // template.yaml cannot compare numbers at deploy time (a short
    // MaxLeaseSeconds deploys and every acquire is refused); here we can.
    const lease = options.workloadTimeout.toSeconds() + this.workloadMaxRun.toSeconds() + this.leaseMargin.toSeconds();
    const cap = this.maxLease?.toSeconds() ?? MAX_LEASE_SECONDS;
    if (lease > cap) {
      throw new Error(`SfnLock: the lease (workloadTimeout + workloadMaxRun + leaseMargin = ${lease} s) exceeds maxLease (${cap} s): acquire-lock would refuse every acquire`);
    }
    this.arounds += 1;
    const scope = new Construct(this, `Around${this.arounds}`);
    this.leftLockStates.push(`${options.prefix ?? ''}Succeed And Leave Lock To Cleanup`);
    return buildAround(scope, {
      acquireArn: this.acquireVersion.functionArn,
      releaseArn: this.releaseVersion.functionArn,
      workloadMaxRun: this.workloadMaxRun,
      leaseMargin: this.leaseMargin,
    }, work, options);
  }

  /** A Lambda function as the shipped definitions run their sample workload. */
  lambdaWorkload(scope: Construct, fn: lambda.IFunction, options: LambdaWorkloadOptions): sfn.Chain {
    // After a Task timeout or a Lambda service error the invocation may run
    // on up to its own Timeout, and the held path waits workloadMaxRun: the
    // one must fit in the other (template.yaml: WorkloadMaxRunSeconds).
    const own = fn instanceof lambda.Function ? fn.timeout?.toSeconds() ?? 3 : undefined;
    if (own !== undefined && own > this.workloadMaxRun.toSeconds()) {
      throw new Error(`SfnLock: the workload function's Timeout (${own} s) is over workloadMaxRun (${this.workloadMaxRun.toSeconds()} s): after its Task timed out it may run on longer than the lock is held for it; shorten its Timeout or raise workloadMaxRun`);
    }
    return lambdaWorkload(scope, fn, options);
  }

  /** A state machine that runs around(): its role may call every version of
   * the lock functions, and the sweep frees what its executions leave held.
   * With its log group, entries into Succeed And Leave Lock To Cleanup count
   * for the LeftLockToCleanup alarm. */
  register(stateMachine: sfn.IStateMachine, options: { logGroup?: logs.ILogGroup } = {}): void {
    // A second call changes nothing: one ARN in the sweep, one metric filter.
    if (this.registered.has(stateMachine)) return;
    // Every version: executions started before an update still call theirs.
    stateMachine.grantPrincipal.addToPrincipalPolicy(new iam.PolicyStatement({
      // One per lock: a machine under two locks gets two (IAM wants unique Sids).
      sid: `InvokeTheLockFunctions${this.node.id.replace(/[^A-Za-z0-9]/g, '')}`,
      actions: ['lambda:InvokeFunction'],
      resources: [`${this.acquireFunction.functionArn}:*`, `${this.releaseFunction.functionArn}:*`],
    }));
    if (Construct.isConstruct(stateMachine.grantPrincipal)) {
      const why = 'Every published version of the lock function (ARN:*): an execution started before a stack update still calls the version it started with.';
      acknowledge(stateMachine.grantPrincipal, [this.acquireFunction, this.releaseFunction]
        .map((f) => [`AwsSolutions-IAM5[Resource::${nagRef(f, 'Arn')}:*]`, why]));
    }
    this.registered.add(stateMachine);
    this.sweep.add(stateMachine);
    if (options.logGroup) {
      new LeftLockFilter(this, `LeftLockToCleanup${this.sweep.count}`, {
        logGroup: options.logGroup, namespace: this.metricsNamespace,
        states: () => [...new Set(this.leftLockStates)],
      });
    }
  }
}

function checkRange(name: string, d: Duration, min: number, max: number) {
  const s = d.toSeconds();
  if (s < min || s > max) throw new Error(`SfnLock: ${name} must be ${min} to ${max} s, got ${s}`);
}

interface FunctionSpec {
  props: SfnLockProps; binary: string; timeout: number; description: string;
  env: Record<string, string>; retention: logs.RetentionDays;
}

function lockFunction(scope: Construct, id: string, s: FunctionSpec): lambda.Function {
  const asset = path.join(s.props.codeDirectory, s.binary);
  if (!fs.existsSync(path.join(asset, 'bootstrap'))) {
    throw new Error(`SfnLock: no ${asset}/bootstrap; build the functions first (at the repository root: cargo lambda build --release --arm64, which writes target/lambda/), or point codeDirectory at them`);
  }
  const logGroup = new logs.LogGroup(scope, `${id}LogGroup`, {
    retention: s.retention, removalPolicy: RemovalPolicy.DESTROY,
  });
  // A role of its own with only its log group: the managed
  // AWSLambdaBasicExecutionRole would grant logs on every group.
  const role = new iam.Role(scope, `${id}Role`, {
    assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
  });
  role.addToPolicy(new iam.PolicyStatement({
    sid: 'WriteItsOwnLogs',
    actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    resources: [logGroup.logGroupArn],
  }));
  const fn = new lambda.Function(scope, `${id}Function`, {
    description: s.description,
    runtime: lambda.Runtime.PROVIDED_AL2023,
    handler: 'bootstrap',
    code: lambda.Code.fromAsset(asset),
    architecture: s.props.architecture ?? lambda.Architecture.ARM_64,
    memorySize: 128,
    timeout: Duration.seconds(s.timeout),
    role,
    logGroup,
    loggingFormat: lambda.LoggingFormat.JSON,
    applicationLogLevelV2: lambda.ApplicationLogLevel.INFO,
    environment: s.env,
    // A replaced version stays for the executions still calling it.
    currentVersionOptions: { removalPolicy: RemovalPolicy.RETAIN },
  });
  if (s.binary !== 'release-execution-locks') {
    // template.yaml's AutoPublishAlias: live.
    new lambda.Alias(scope, `${id}LiveAlias`, { aliasName: 'live', version: fn.currentVersion });
  }
  return fn;
}
