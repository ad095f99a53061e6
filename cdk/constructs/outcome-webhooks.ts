/**
 * Outcome webhooks to the customer (docs/outcome-webhooks.md): `outcome-events` reads the tasks and
 * control tables' DynamoDB streams through event source mappings whose filters (`shared/functions.ts`)
 * let only task ends and job records invoke it, and queues deliveries; `outcome-webhooks` consumes
 * the delivery queue and POSTs them, signed with the client's secret.
 *
 * When deliveries land in the dead-letter queue (alarm `switchboard-{stage}-outcome-webhooks-dlq-messages`),
 * the client's receiver refused them for 24 hours: once it answers again, move them back with
 * `npm run outcome-webhooks:redrive -- --stage {stage}` or the stack output
 * `OutcomeWebhooksDlqRedriveCommand` (receivers drop duplicates by event id).
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import { OUTCOME_SECRET_KEY_PREFIX } from '#shared/adapters/dynamo-outcome-webhooks.ts';
import { outcomeFunctions, STREAM_FAILURE_HANDLING, STREAM_FAILURES_QUEUE } from '#shared/functions.ts';
import { keys } from '#shared/jobs/model.ts';
import { resourceName, tableSpec } from '#shared/resources.ts';
import { SwitchboardFunction } from './function.ts';
import { deadLetterAlarm, redriveCommandOutput, type StatefulResources } from './stateful.ts';

export interface OutcomeWebhooksProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  /** Keep log groups when the stack is deleted (production: yes). */
  readonly retain: boolean;
  /** Where the dead-letter and stream-lag alarms notify. */
  readonly alarmTopic: sns.ITopic;
}

/** A stream record unread for this long has a day minus this left before DynamoDB drops it. */
const ITERATOR_AGE_ALARM = Duration.hours(1);

export class OutcomeWebhooks extends Construct {
  /** The producer: stream records of task ends and jobs → queued deliveries. */
  readonly events: SwitchboardFunction;
  /** The delivery worker: one signed POST per queue message. */
  readonly deliveries: SwitchboardFunction;
  readonly streamSources: readonly DynamoEventSource[];
  /**
   * Where the stream mappings send the description of a batch they gave up on (shard and sequence
   * range, not the records): alarmed by the operations construct (`outcome-events-failures`).
   */
  readonly streamFailures: sqs.Queue;
  readonly alarms: {
    /** Deliveries a receiver refused for 24 hours. */
    readonly deadLetters: cloudwatch.Alarm;
    /** The producer is behind on a stream (failing batches hold their shard). */
    readonly streamLag: cloudwatch.Alarm;
  };

  constructor(scope: Construct, id: string, props: OutcomeWebhooksProps) {
    super(scope, id);
    const logRemovalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const { tables, queues } = props.stateful;
    const deliveryQueue = queues['outcome-webhooks'];
    const control = tableSpec('control');
    // Both functions read a client's settings (whether it has a webhook, and its URL), nothing else.
    const clientSettings = {
      reads: { actions: ['dynamodb:GetItem'], leadingKeys: [keys.client('*').pk] },
    };

    const producer = outcomeFunctions['outcome-events'];
    this.events = new SwitchboardFunction(this, 'Events', { spec: producer, logRemovalPolicy })
      .bindTable(tables.control, 'read', control.envVar, clientSettings)
      .bindQueue(deliveryQueue.queue, 'send', deliveryQueue.spec.envVar);
    this.streamFailures = new sqs.Queue(this, 'StreamFailures', {
      queueName: resourceName(props.stage, STREAM_FAILURES_QUEUE),
      removalPolicy: logRemovalPolicy,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    NagSuppressions.addResourceSuppressions(this.streamFailures, [
      {
        id: 'AwsSolutions-SQS3',
        reason:
          'This queue is the on-failure destination of the outcome-events stream mappings (a dead-letter queue in all but name): nothing consumes it but an operator redriving, so it needs no DLQ of its own.',
      },
    ]);
    const onFailure = new SqsDlq(this.streamFailures);
    this.streamSources = (producer.streamSources ?? []).map((source) => {
      const eventSource = new DynamoEventSource(tables[source.table], {
        // A new mapping reads the day of records the stream holds: replayed changes carry the same
        // event ids, which receivers drop as duplicates, so nothing is lost and nothing doubles.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: source.batchSize,
        maxBatchingWindow: Duration.seconds(source.maxBatchingWindowSeconds),
        filters: source.filters.map((pattern) => lambda.FilterCriteria.filter({ ...pattern })),
        // A failing batch is split and retried a bounded number of times, then described on the
        // on-failure queue and skipped: the shard never stalls (docs/outcome-webhooks.md). No
        // ReportBatchItemFailures: the handler queues a batch's deliveries as one and fails whole.
        bisectBatchOnError: STREAM_FAILURE_HANDLING.bisectBatchOnError,
        retryAttempts: STREAM_FAILURE_HANDLING.retryAttempts,
        maxRecordAge: Duration.seconds(STREAM_FAILURE_HANDLING.maxRecordAgeSeconds),
        onFailure,
      });
      this.events.addEventSource(eventSource);
      return eventSource;
    });

    this.deliveries = new SwitchboardFunction(this, 'Deliveries', {
      spec: outcomeFunctions['outcome-webhooks'],
      logRemovalPolicy,
    })
      .bindTable(tables.control, 'read', control.envVar, clientSettings)
      // The client's signing secret: its OUTCOMEWEBHOOK# item only, never a LINE channel's secret.
      .bindTable(tables.channels, 'read', tableSpec('channels').envVar, {
        reads: { actions: ['dynamodb:GetItem'], leadingKeys: [`${OUTCOME_SECRET_KEY_PREFIX}*`] },
      });
    this.deliveries.consumeQueue(deliveryQueue.queue, deliveryQueue.spec);

    const streamLag = this.events
      .metric('IteratorAge', { period: Duration.minutes(5), statistic: cloudwatch.Stats.MAXIMUM })
      .createAlarm(this, 'StreamLagAlarm', {
        alarmName: resourceName(props.stage, 'outcome-events-stream-lag'),
        alarmDescription: `outcome-events is over ${ITERATOR_AGE_ALARM.toHumanString()} behind on the tasks or control stream (a failing batch holds its shard): DynamoDB drops stream records after 24 hours, and with them those outcome webhooks. Fix the cause in the outcome-events logs.`,
        threshold: ITERATOR_AGE_ALARM.toMilliseconds(),
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    streamLag.addAlarmAction(new actions.SnsAction(props.alarmTopic));
    this.alarms = {
      deadLetters: deadLetterAlarm(this, 'DlqAlarm', deliveryQueue, {
        alarmName: resourceName(props.stage, 'outcome-webhooks-dlq-messages'),
        description:
          "Outcome webhook deliveries were refused by a client's receiver for 24 hours and are in the dead-letter queue. Once the receiver answers again, redrive with npm run outcome-webhooks:redrive or the stack output OutcomeWebhooksDlqRedriveCommand (receivers drop duplicates by event id).",
        topic: props.alarmTopic,
      }),
      streamLag,
    };
    redriveCommandOutput(this, 'DlqRedriveCommand', 'OutcomeWebhooksDlqRedriveCommand', deliveryQueue);

    // Lambda reads a stream with the function's role, and dynamodb:ListStreams names no stream.
    NagSuppressions.addResourceSuppressions(
      this.events.role!,
      [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            'The DynamoDB event source mappings read the streams with this role: dynamodb:ListStreams supports no resource-level permission (Resource "*"); DescribeStream, GetShardIterator and GetRecords name the two tables\' streams.',
          appliesTo: ['Resource::*'],
        },
      ],
      true,
    );
  }
}
