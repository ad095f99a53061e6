/**
 * Inbound LINE webhooks: the receiver (verify, acknowledge, enqueue) behind the HTTP API, the
 * processor that consumes the webhook-events FIFO queue, their alarms and the topic the alarms
 * notify.
 *
 * When messages land in the dead-letter queue (alarm `switchboard-{stage}-webhook-dlq-messages`),
 * find and fix the cause in the processor's logs, then move them back with the command in the
 * stack output `WebhookEventsDlqRedriveCommand`:
 *
 * ```sh
 * aws sqs start-message-move-task --source-arn <dlq-arn> --destination-arn <queue-arn>
 * ```
 *
 * A redriven event is safe to process again: the processor skips events it has recorded as acted
 * on, and never re-sends with a retry key first used more than 23 hours ago (LINE forgets it at 24).
 */
import { CfnOutput, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { DEFAULT_LINE_API_URL } from '#shared/line/messaging-client.ts';
import { CHANNELS_BY_CLIENT_INDEX, resourceName, tableSpec } from '#shared/resources.ts';
import { routes } from '#shared/routes.ts';
import { SwitchboardFunction } from './function.ts';
import type { SwitchboardHttpApi } from './http-api.ts';
import {
  alarmOnAny,
  deadLetterAlarm,
  type QueuePair,
  redriveCommandOutput,
  type StatefulResources,
} from './stateful.ts';

export interface WebhooksProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  /** Keep log groups and the alarm key when the stack is deleted (production: yes). */
  readonly retain: boolean;
}

/** The receiver and processor Lambdas, their alarms, and the alarm topic. */
export class Webhooks extends Construct {
  readonly receiver: SwitchboardFunction;
  readonly processor: SwitchboardFunction;
  /** The channels API (list, show, create or replace a channel, rotate its secret). */
  readonly channelsApi: SwitchboardFunction;
  /**
   * The role operators assume to run `npm run channel` (channels and callback secrets): the
   * secrets key's policy names it, as it names each function that reads secrets.
   */
  readonly channelAdmin: iam.Role;
  /** Every Switchboard alarm notifies this topic; subscribe the on-call address to it. */
  readonly alarmTopic: sns.Topic;
  readonly alarms: {
    readonly deadLetters: cloudwatch.Alarm;
    readonly receiverErrors: cloudwatch.Alarm;
    readonly processorErrors: cloudwatch.Alarm;
  };
  private readonly stage: string;

  constructor(scope: Construct, id: string, props: WebhooksProps) {
    super(scope, id);
    this.stage = props.stage;
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const webhookEvents = props.stateful.queues['webhook-events'];

    const { receiver, processor, channelsApi } = this.webhookFunctions(props.stateful, removalPolicy);
    this.receiver = receiver;
    this.processor = processor;
    this.channelsApi = channelsApi;
    this.channelAdmin = this.channelAdminRole(props.stateful);
    this.alarmTopic = this.makeAlarmTopic(removalPolicy);
    this.alarms = this.webhookAlarms(webhookEvents);
    this.queueOutputs(webhookEvents);
  }

  /** The receiver, the processor on the webhook-events queue, and the channels API, each with its tables. */
  private webhookFunctions(
    stateful: StatefulResources,
    removalPolicy: RemovalPolicy,
  ): { receiver: SwitchboardFunction; processor: SwitchboardFunction; channelsApi: SwitchboardFunction } {
    const { tables, queues } = stateful;
    const webhookEvents = queues['webhook-events'];
    const channels = tableSpec('channels');

    // The receiver reads channels (to verify signatures) and only ever adds to the queue.
    const receiver = new SwitchboardFunction(this, 'Receiver', {
      spec: functions['webhook-receiver'],
      logRemovalPolicy: removalPolicy,
    })
      .bindTable(tables.channels, 'read', channels.envVar)
      .bindQueue(webhookEvents.queue, 'send', webhookEvents.spec.envVar);

    const processor = new SwitchboardFunction(this, 'Processor', {
      spec: functions['webhook-processor'],
      environment: { LINE_API_URL: DEFAULT_LINE_API_URL },
      logRemovalPolicy: removalPolicy,
    })
      .bindTable(tables.channels, 'read', channels.envVar)
      // Idempotency records: created and updated, never deleted (TTL removes them).
      .bindTable(tables.events, 'readwrite', tableSpec('events').envVar, {
        writes: { actions: ['dynamodb:PutItem', 'dynamodb:UpdateItem'] },
      })
      // Follows and unfollows, and the suppression entries they add and take back, only: leases,
      // jobs and client settings share the control table.
      .bindTable(tables.control, 'readwrite', tableSpec('control').envVar, {
        writes: {
          actions: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
          leadingKeys: ['OPTOUT#*', 'SUPPRESS#*'],
        },
      });
    processor.consumeQueue(webhookEvents.queue, webhookEvents.spec);

    // The channels API reads a channel, lists a client's (index byClient) and writes one only
    // with a condition (new, or still the client's and unchanged): never a delete.
    const channelsApi = new SwitchboardFunction(this, 'ChannelsApi', {
      spec: functions['channels-api'],
      logRemovalPolicy: removalPolicy,
    }).bindTable(tables.channels, 'readwrite', channels.envVar, {
      reads: { actions: ['dynamodb:GetItem'] },
      writes: { actions: ['dynamodb:PutItem'] },
      indexes: [CHANNELS_BY_CLIENT_INDEX],
    });
    return { receiver, processor, channelsApi };
  }

  /** The role operators assume to run `npm run channel`, and its output. */
  private channelAdminRole(stateful: StatefulResources): iam.Role {
    const { tables } = stateful;
    const channelAdmin = new iam.Role(this, 'ChannelAdminRole', {
      // Any principal of this account whose own policy lets it assume this role.
      assumedBy: new iam.AccountRootPrincipal(),
      description: 'Switchboard: manage LINE channels and telephony callback secrets (npm run channel)',
      maxSessionDuration: Duration.hours(1),
    });
    channelAdmin.addToPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [tables.channels.tableArn],
      }),
    );
    stateful.allowSecretsKeyUse(channelAdmin, 'readwrite');
    new CfnOutput(this, 'ChannelAdminRoleArn', {
      key: 'ChannelAdminRoleArn',
      description: 'Assume this role to run `npm run channel` (channels, callback secrets)',
      value: channelAdmin.roleArn,
    });
    return channelAdmin;
  }

  /** The dead-letter and error alarms of the webhook functions; each notifies the alarm topic. */
  private webhookAlarms(webhookEvents: QueuePair): Webhooks['alarms'] {
    // Any occurrence is worth a look: each alarm fires on the first one (> 0 in one period).
    const alarm = (name: string, metric: cloudwatch.Metric, description: string) =>
      alarmOnAny(this, name, metric, {
        alarmName: resourceName(this.stage, name),
        description,
        topic: this.alarmTopic,
      });
    return {
      deadLetters: deadLetterAlarm(this, 'webhook-dlq-messages', webhookEvents, {
        alarmName: resourceName(this.stage, 'webhook-dlq-messages'),
        description:
          'Webhook events are in the dead-letter queue: they were not acted on. Fix the cause, then redrive with the stack output WebhookEventsDlqRedriveCommand.',
        topic: this.alarmTopic,
      }),
      receiverErrors: alarm(
        'webhook-receiver-errors',
        this.receiver.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        'The webhook receiver failed (error or timeout): LINE got a 5xx and may never redeliver those events.',
      ),
      processorErrors: alarm(
        'webhook-processor-errors',
        this.processor.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        'The webhook processor failed a whole batch (error or timeout); its events return to the queue and reach the DLQ after repeated failures.',
      ),
    };
  }

  /** The webhook-events queue's URLs, its redrive command, and the alarm topic's ARN. */
  private queueOutputs(webhookEvents: QueuePair): void {
    new CfnOutput(this, 'QueueUrl', {
      key: 'WebhookEventsQueueUrl',
      description: 'URL of the webhook-events FIFO queue',
      value: webhookEvents.queue.queueUrl,
    });
    new CfnOutput(this, 'DlqUrl', {
      key: 'WebhookEventsDlqUrl',
      description: 'URL of the webhook-events dead-letter queue',
      value: webhookEvents.deadLetterQueue.queueUrl,
    });
    redriveCommandOutput(this, 'DlqRedriveCommand', 'WebhookEventsDlqRedriveCommand', webhookEvents);
    new CfnOutput(this, 'AlarmTopicArn', {
      key: 'AlarmTopicArn',
      description: 'SNS topic every Switchboard alarm notifies',
      value: this.alarmTopic.topicArn,
    });
  }

  /** Adds the `WebhookUrl` output: the URL to enter in the LINE console, per channel. */
  publishWebhookUrl(api: SwitchboardHttpApi): void {
    const route = routes.find((r) => r.functionId === 'webhook-receiver');
    if (!route) throw new Error('shared/routes.ts has no route for webhook-receiver');
    new CfnOutput(this, 'WebhookUrl', {
      key: 'WebhookUrl',
      description: "LINE webhook URL: replace {channelId} with the channel's id",
      value: api.urlOf(route.path),
    });
  }

  /**
   * An SSE topic under a key of its own: the AWS-managed SNS key cannot be granted to CloudWatch,
   * so alarms could not publish to a topic encrypted with it.
   */
  private makeAlarmTopic(removalPolicy: RemovalPolicy): sns.Topic {
    const stack = Stack.of(this);
    const alarmArns = `arn:${stack.partition}:cloudwatch:${stack.region}:${stack.account}:alarm:${resourceName(this.stage, '*')}`;
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: { 'aws:SourceArn': alarmArns },
    };
    const cloudwatchService = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
    const key = new kms.Key(this, 'AlarmTopicKey', {
      description: 'Switchboard: encrypts alarm notifications',
      enableKeyRotation: true,
      removalPolicy,
    });
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublishEncrypted',
        principals: [cloudwatchService],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromOurAlarms,
      }),
    );
    const topic = new sns.Topic(this, 'AlarmTopic', {
      topicName: resourceName(this.stage, 'alarms'),
      displayName: `Switchboard ${this.stage} alarms`,
      masterKey: key,
      enforceSSL: true,
    });
    // enforceSSL writes a topic policy, which replaces SNS's default one: allow our alarms again.
    topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [cloudwatchService],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: fromOurAlarms,
      }),
    );
    return topic;
  }
}
