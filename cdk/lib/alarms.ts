// template.yaml's five alarms: each the 5-minute sum of a metric that is 0
// in a healthy stack, in ALARM at the first occurrence, OK after a quiet 5
// minutes (missing data is no breach: the functions emit nothing while
// nothing happens). docs/operating.md, "What to watch", says what each means.
import { Duration, Lazy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface AlarmsProps {
  readonly namespace: string;
  readonly deadLetterQueue: sqs.IQueue;
  readonly topicArn?: string;
}

export function addAlarms(scope: Construct, p: AlarmsProps): cloudwatch.Alarm[] {
  const alarm = (id: string, metric: cloudwatch.IMetric, description: string) => {
    const a = new cloudwatch.Alarm(scope, id, {
      alarmDescription: `sfn-lock: ${description} docs/operating.md, "What to watch".`,
      metric,
      evaluationPeriods: 1,
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (p.topicArn) {
      const action: cloudwatch.IAlarmAction = { bind: () => ({ alarmActionArn: p.topicArn! }) };
      a.addAlarmAction(action);
      a.addOkAction(action);
    }
    return a;
  };
  const sum = (metricName: string) => new cloudwatch.Metric({
    namespace: p.namespace, metricName, statistic: 'Sum', period: Duration.minutes(5),
    unit: cloudwatch.Unit.COUNT,
  });
  return [
    alarm('SweepReleasesAlarm', sum('SweepReleases'),
      'the cleanup sweep freed a lock, so an execution ended without releasing it.'),
    alarm('HeldByOtherAlarm', sum('HeldByOther'),
      "a release found the lock held by another owner: the caller's lease ran out while it worked."),
    alarm('LeftLockToCleanupAlarm', sum('LeftLockToCleanup'),
      'an execution succeeded through Succeed And Leave Lock To Cleanup: its release failed after its retries.'),
    alarm('AcquireErrorsAlarm', sum('AcquireErrors'),
      'an acquire failed for another reason than contention (invalid request, store unavailable or misconfigured).'),
    // Messages moved to a dead-letter queue do not count as sent there: watch its depth.
    alarm('CleanupDeadLetterQueueAlarm', p.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      statistic: 'Maximum', period: Duration.minutes(5),
    }), 'the cleanup dead-letter queue holds execution ends the sweep could not process.'),
  ];
}

export interface LeftLockFilterProps {
  readonly logGroup: logs.ILogGroup;
  readonly namespace: string;
  /** The state names, read at synth (around() may come after register()). */
  readonly states: () => string[];
}

/** Counts entries into Succeed And Leave Lock To Cleanup (any prefix the
 * lock's around() calls used) in a state machine's log group: the
 * LeftLockToCleanup metric, which no function emits. */
export class LeftLockFilter extends Construct {
  constructor(scope: Construct, id: string, p: LeftLockFilterProps) {
    super(scope, id);
    new logs.CfnMetricFilter(this, 'Filter', {
      logGroupName: p.logGroup.logGroupName,
      filterPattern: Lazy.string({
        produce: () => {
          const names = p.states().map((n) => `$.details.name = ${JSON.stringify(n)}`).join(' || ');
          return `{ $.type = "SucceedStateEntered" && (${names}) }`;
        },
      }),
      metricTransformations: [{
        metricNamespace: p.namespace, metricName: 'LeftLockToCleanup', metricValue: '1', unit: 'Count',
      }],
    });
  }
}
