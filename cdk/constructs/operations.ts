/**
 * What an operator watches and is woken by: one CloudWatch dashboard (per client and per channel,
 * from the metrics every Lambda and broker publishes in the `Switchboard` namespace through
 * Powertools) and the alarms that need a person, to the stack's alarm topic. The alarms on
 * dead-letter queues, function errors and the job manager's schedule live with their
 * constructs; this one adds those on the brokers' own figures. docs/operating.md
 * says what each panel and alarm means and what to do.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE } from '#shared/adapters/powertools.ts';
import { resourceName } from '#shared/resources.ts';
import type { BrokerFleet } from './broker-fleet.ts';
import type { SwitchboardFunction } from './function.ts';
import type { QueuePair } from './stateful.ts';

export interface OperationsProps {
  readonly stage: string;
  readonly alarmTopic: sns.ITopic;
  readonly fleet: BrokerFleet;
  readonly functions: {
    readonly receiver: SwitchboardFunction;
    readonly processor: SwitchboardFunction;
    readonly ingest: SwitchboardFunction;
    readonly jobManager: SwitchboardFunction;
  };
  /** Every function of the stack: their cold starts are on the dashboard. */
  readonly allFunctions: readonly SwitchboardFunction[];
  /** The queues whose dead letters an operator redrives. */
  readonly queues: Readonly<Record<string, QueuePair>>;
  /** The outcome-events stream mappings' on-failure queue (batches they gave up on). */
  readonly streamFailures: sqs.IQueue;
}

/** Thresholds of the alarms this construct adds (docs/operating.md). */
export const OPERATIONS_THRESHOLDS = {
  /** Leases lost without a release in 5 minutes, across clients. */
  leasesLost: 3,
  /** Failed task-protection requests in 5 minutes, across brokers. */
  protectionFailures: 3,
  /** Percent of a channel's monthly message quota. */
  lineQuotaPercent: 90,
  /** p99 of the webhook acknowledgement, ms, for 3 minutes in 5 (LINE gives up after 2 s). */
  webhookAckP99Ms: 1_000,
  /** p99 of the receiver's cold start (Init Duration), ms, in 2 of 3 quarter hours: inside LINE's 2 s. */
  receiverInitP99Ms: 1_000,
} as const;

const SECOND = Duration.seconds(1);
const MINUTE = Duration.minutes(1);
const FIVE_MINUTES = Duration.minutes(5);

/** A Switchboard metric of one service, across clients (the roll-up an alarm can watch). */
function metric(service: string, metricName: string, statistic: string, period: Duration): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service },
    statistic,
    period,
  });
}

/**
 * Every client's (or channel's) series of a metric, found by search: clients need no deploy.
 * `service` undefined: from every service that publishes it.
 */
function perClient(
  service: string | undefined,
  metricName: string,
  statistic: string,
  period: Duration,
  dimensions: readonly string[] = ['clientId'],
): cloudwatch.MathExpression {
  const schema = [METRICS_NAMESPACE, ...dimensions, 'service'].join(',');
  return new cloudwatch.MathExpression({
    expression: `SEARCH('{${schema}} MetricName="${metricName}"${service ? ` service="${service}"` : ''}', '${statistic}', ${period.toSeconds()})`,
    label: '',
    period,
    usingMetrics: {},
  });
}

/** A section's title line across the dashboard. */
function heading(markdown: string): cloudwatch.TextWidget {
  return new cloudwatch.TextWidget({ markdown, width: 24, height: 1 });
}

/** One row of graphs sharing the dashboard's 24 columns evenly. */
function graphRow(
  ...graphs: readonly Omit<cloudwatch.GraphWidgetProps, 'width'>[]
): cloudwatch.GraphWidget[] {
  const width = 24 / graphs.length;
  return graphs.map((graph) => new cloudwatch.GraphWidget({ ...graph, width }));
}

export class Operations extends Construct {
  readonly dashboard: cloudwatch.Dashboard;
  readonly alarms: {
    readonly leasesLost: cloudwatch.Alarm;
    readonly protectionFailures: cloudwatch.Alarm;
    readonly lineQuota: cloudwatch.Alarm;
    readonly webhookAckSlow: cloudwatch.Alarm;
    readonly receiverColdStartSlow: cloudwatch.Alarm;
    /** A stream mapping gave a batch up: its outcome webhooks are not sent until redriven. */
    readonly streamFailures: cloudwatch.Alarm;
  };

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    this.alarms = this.makeAlarms(props);
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: resourceName(props.stage, 'operations'),
      defaultInterval: Duration.hours(3),
      widgets: [
        this.callWidgets(),
        this.messageWidgets(),
        this.webhookWidgets(props),
        this.fleetWidgets(props),
        this.coldStartWidgets(props),
        [
          new cloudwatch.AlarmStatusWidget({
            title: 'Alarms',
            width: 24,
            alarms: Object.values(this.alarms),
          }),
        ],
      ],
    });
  }

  private callWidgets(): cloudwatch.IWidget[] {
    return [
      heading('## Calls, per client\nIn flight against the contract, starts against the line, answers.'),
      ...graphRow(
        {
          title: 'Calls in flight (peak per second) and the limit',
          left: [
            perClient('broker', 'CallsInFlight', 'Maximum', SECOND),
            perClient('broker', 'CallLimit', 'Maximum', SECOND),
          ],
        },
        {
          title: 'Call starts per second and the line rate',
          left: [
            perClient('broker', 'CallStarts', 'Sum', SECOND),
            perClient('broker', 'CallRateLimit', 'Maximum', SECOND),
          ],
        },
        {
          title: 'Answer rate, % (all clients) and calls ended per client',
          left: [
            // Final statuses arrive as callbacks (call-status) or Connect contact events.
            new cloudwatch.MathExpression({
              expression:
                '100 * (FILL(answered, 0) + FILL(answeredConnect, 0)) / (FILL(ended, 0) + FILL(endedConnect, 0))',
              label: 'answered %',
              period: FIVE_MINUTES,
              usingMetrics: {
                answered: metric('call-status', 'CallsAnswered', 'Sum', FIVE_MINUTES),
                answeredConnect: metric('connect-events', 'CallsAnswered', 'Sum', FIVE_MINUTES),
                ended: metric('call-status', 'CallsEnded', 'Sum', FIVE_MINUTES),
                endedConnect: metric('connect-events', 'CallsEnded', 'Sum', FIVE_MINUTES),
              },
            }),
          ],
          right: [perClient(undefined, 'CallsEnded', 'Sum', FIVE_MINUTES)],
        },
      ),
    ];
  }

  private messageWidgets(): cloudwatch.IWidget[] {
    const channel = ['channelId', 'clientId'];
    return [
      heading("## Messages, per client and channel\nLINE's rate (2,000/s), its 429s, the monthly quota."),
      ...graphRow(
        {
          title: 'Messages sent per second',
          left: [perClient('broker', 'MessagesSent', 'Sum', SECOND, channel)],
        },
        {
          title: "LINE 429s per minute (the rate, or the month's quota)",
          left: [perClient('broker', 'LineRateLimited', 'Sum', MINUTE, channel)],
        },
        {
          title: 'Monthly message quota used, %',
          left: [perClient('broker', 'LineQuotaUsedPercent', 'Maximum', FIVE_MINUTES, ['channelId'])],
          leftAnnotations: [{ value: OPERATIONS_THRESHOLDS.lineQuotaPercent, label: 'alarm' }],
          leftYAxis: { min: 0, max: 100 },
        },
      ),
    ];
  }

  private webhookWidgets(props: OperationsProps): cloudwatch.IWidget[] {
    return [
      heading(
        '## Webhooks and lists\nLINE waits 2 s for the acknowledgement; what the processor did; dead letters.',
      ),
      ...graphRow(
        {
          title: 'Webhook acknowledgement, ms (p50, p99)',
          left: [
            metric('webhook-receiver', 'WebhookAckLatency', 'p50', MINUTE),
            metric('webhook-receiver', 'WebhookAckLatency', 'p99', MINUTE),
          ],
          leftAnnotations: [{ value: OPERATIONS_THRESHOLDS.webhookAckP99Ms, label: 'alarm' }],
        },
        {
          title: 'Webhook events: accepted per channel; processed',
          left: [perClient('webhook-receiver', 'WebhookEventsAccepted', 'Sum', MINUTE, ['channelId'])],
          right: ['Done', 'Skipped', 'Retried', 'RateLimited', 'Failed'].map((name) =>
            metric('webhook-processor', name, 'Sum', MINUTE),
          ),
        },
        {
          title: 'Dead letters (visible messages)',
          left: Object.entries(props.queues).map(([name, pair]) =>
            pair.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
              label: name,
              period: MINUTE,
              statistic: 'Maximum',
            }),
          ),
        },
        {
          title: 'List ingest: rows per second, rows',
          left: [metric('ingest', 'IngestRowsPerSecond', 'Maximum', FIVE_MINUTES)],
          right: [metric('ingest', 'IngestRows', 'Sum', FIVE_MINUTES)],
        },
      ),
    ];
  }

  private fleetWidgets(props: OperationsProps): cloudwatch.IWidget[] {
    const { fleet, functions } = props;
    return [
      heading('## Brokers and the job manager\nLeases, task protection, fleet size, the per-minute run.'),
      ...graphRow(
        {
          title: 'Brokers: desired and running',
          left: [
            fleet.containerInsightsMetric('DesiredTaskCount', MINUTE),
            fleet.containerInsightsMetric('RunningTaskCount', MINUTE),
          ],
        },
        {
          title: 'Leases lost per client; task protection failures',
          left: [perClient('broker', 'LeasesLost', 'Sum', FIVE_MINUTES)],
          right: [metric('broker', 'ProtectionFailures', 'Sum', FIVE_MINUTES)],
        },
        {
          title: 'Job manager: run time and lag behind its minute, ms',
          left: [
            metric('job-manager', 'JobManagerRunTime', 'Maximum', MINUTE),
            metric('job-manager', 'JobManagerLag', 'Maximum', MINUTE),
          ],
        },
        {
          title: 'Function errors',
          left: Object.values(functions).map((fn) =>
            fn.metricErrors({ label: fn.spec.id, period: FIVE_MINUTES, statistic: 'Sum' }),
          ),
        },
      ),
    ];
  }

  private coldStartWidgets(props: OperationsProps): cloudwatch.IWidget[] {
    const FIFTEEN_MINUTES = Duration.minutes(15);
    return [
      heading(
        "## Cold starts\nLambda's Init Duration (the runtime, the bundle's import, the code run at import), from each function's reports.",
      ),
      ...graphRow(
        {
          title: 'Init Duration p99 per function, ms',
          left: props.allFunctions.map((fn) =>
            fn.metricInitDuration({ statistic: 'p99', period: FIFTEEN_MINUTES }).with({ label: fn.spec.id }),
          ),
          leftAnnotations: [{ value: OPERATIONS_THRESHOLDS.receiverInitP99Ms, label: 'receiver alarm' }],
          leftYAxis: { min: 0 },
        },
        {
          title: 'Cold starts per function (count of Init Durations)',
          left: props.allFunctions.map((fn) =>
            fn
              .metricInitDuration({ statistic: 'SampleCount', period: FIFTEEN_MINUTES })
              .with({ label: fn.spec.id }),
          ),
          leftYAxis: { min: 0 },
        },
      ),
    ];
  }

  private makeAlarms(props: OperationsProps): Operations['alarms'] {
    const notify = new actions.SnsAction(props.alarmTopic);
    const name = (suffix: string) => resourceName(props.stage, suffix);
    const atLeast = (
      id: string,
      source: cloudwatch.Metric,
      threshold: number,
      description: string,
      evaluation: { periods: number; datapoints: number } = { periods: 1, datapoints: 1 },
    ) => {
      const alarm = source.createAlarm(this, id, {
        alarmName: name(id),
        alarmDescription: description,
        threshold,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: evaluation.periods,
        datapointsToAlarm: evaluation.datapoints,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      alarm.addAlarmAction(notify);
      return alarm;
    };
    const t = OPERATIONS_THRESHOLDS;
    return {
      leasesLost: atLeast(
        'lease-churn',
        metric('broker', 'LeasesLost', 'Sum', FIVE_MINUTES),
        t.leasesLost,
        `Brokers lost ${t.leasesLost}+ client leases without releasing them in 5 minutes (expired or fenced): brokers crash, stall or cannot reach DynamoDB. Look at the broker logs for "lease lost".`,
      ),
      protectionFailures: atLeast(
        'broker-protection-failures',
        metric('broker', 'ProtectionFailures', 'Sum', FIVE_MINUTES),
        t.protectionFailures,
        `Brokers failed ${t.protectionFailures}+ ECS task protection requests in 5 minutes: a scale-in or deploy may stop a broker with calls in flight (they are adopted, but end late).`,
      ),
      lineQuota: atLeast(
        'line-quota-nearly-used',
        metric('broker', 'LineQuotaUsedPercent', 'Maximum', Duration.minutes(15)),
        t.lineQuotaPercent,
        `A LINE channel has used ${t.lineQuotaPercent}% of its monthly message quota: message jobs stop when it is used up. Raise the plan's limit or hold campaigns.`,
      ),
      webhookAckSlow: atLeast(
        'webhook-ack-slow',
        metric('webhook-receiver', 'WebhookAckLatency', 'p99', MINUTE),
        t.webhookAckP99Ms,
        `Webhook acknowledgements are slow (p99 >= ${t.webhookAckP99Ms} ms for 3 of 5 minutes): LINE gives up after 2 s and may not redeliver. Check DynamoDB and SQS latency and the receiver's cold starts.`,
        { periods: 5, datapoints: 3 },
      ),
      receiverColdStartSlow: atLeast(
        'webhook-receiver-cold-start-slow',
        props.functions.receiver.metricInitDuration({ statistic: 'p99', period: Duration.minutes(15) }),
        t.receiverInitP99Ms,
        `The webhook receiver's cold starts are slow (Init Duration p99 >= ${t.receiverInitP99Ms} ms in 2 of 3 quarter hours): LINE waits 2 s for the acknowledgement, and a cold start spends it before the signature is checked. Look at what its bundle grew by (npm run bench:cold-start).`,
        { periods: 3, datapoints: 2 },
      ),
      streamFailures: atLeast(
        'outcome-events-stream-failures',
        props.streamFailures.metricApproximateNumberOfMessagesVisible({
          period: MINUTE,
          statistic: cloudwatch.Stats.MAXIMUM,
        }),
        1,
        'An outcome-events stream mapping gave a batch up after its retries (or the records grew too old) and described it on the on-failure queue: those task ends and job changes sent no outcome webhook. Re-read the batch from the stream within 24 h of its records and run it through outcome-events again (docs/outcome-webhooks.md, "A stream that cannot stall").',
      ),
    };
  }
}
