/**
 * End User Messaging SMS's delivery events into Switchboard (`shared/sms/event-destination.ts`): the
 * stack's SMS configuration set (`switchboard-{stage}-sms`, what texts name unless a client names its
 * own), its event destination — an SNS topic (`./sms-topic.ts`: KMS-encrypted, the service may
 * publish for this configuration set only) for the event types that move a text's state — the
 * `sms-events` queue subscribed to the topic with raw message delivery, and the sms-events function
 * reading that queue in batches (an invocation a batch of up to 200, partial batch failures): it
 * records each event on its task, forward only.
 *
 * No event is lost quietly: SNS retries delivery to the queue and keeps what it cannot deliver in the
 * subscription's dead-letter queue (`switchboard-{stage}-sms-events-undelivered`, alarmed); a record
 * the function
 * fails five receives in a row goes to the queue's dead-letter queue
 * (`switchboard-{stage}-sms-events-dlq`), alarmed; the write is idempotent, so once the cause is
 * fixed an operator redrives it (stack output `SmsEventsDlqRedriveCommand`).
 *
 * Source for the destination: CreateEventDestination (CloudWatch Logs, Firehose or SNS),
 * https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_CreateEventDestination.html;
 * its CloudFormation form `AWS::SMSVOICE::ConfigurationSet` `EventDestinations[].SnsDestination`.
 */
import { CfnOutput, RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as smsvoice from 'aws-cdk-lib/aws-smsvoice';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { functions } from '#shared/functions.ts';
import { resourceName, tableSpec } from '#shared/resources.ts';
import {
  SMS_EVENT_TYPES,
  smsConfigurationSetName,
  smsEventsTopicName,
} from '#shared/sms/event-destination.ts';
import { SwitchboardFunction } from './function.ts';
import { SmsTopic, smsTopicsKey, smsVoiceArn } from './sms-topic.ts';
import { deadLetterAlarm, redriveCommandOutput, type StatefulResources } from './stateful.ts';

export interface SmsEventsProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  /** Keep the log group and the key when the stack is deleted (production: yes). */
  readonly retain: boolean;
  /** Where the dead-letter alarm notifies. */
  readonly alarmTopic: sns.ITopic;
}

export class SmsEvents extends Construct {
  readonly configurationSet: smsvoice.CfnConfigurationSet;
  /** The configuration set's name: what SMS sends name by default. */
  readonly configurationSetName: string;
  /** The key of both SMS topics (`SmsInbound` encrypts its topic with it too). */
  readonly topicsKey: kms.Key;
  readonly topic: sns.Topic;
  readonly handler: SwitchboardFunction;
  /** The topic's subscriber, read by the function in batches (`sms-events` of `shared/resources.ts`). */
  readonly queue: sqs.IQueue;
  /** Records the function failed on every receive (the queue's own dead-letter queue). */
  readonly queueDeadLettersAlarm: cloudwatch.Alarm;
  /** Events SNS could not deliver to the queue (the subscription's dead-letter queue), and its alarm. */
  readonly undelivered: sqs.IQueue;
  readonly undeliveredAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: SmsEventsProps) {
    super(scope, id);
    this.configurationSetName = smsConfigurationSetName(props.stage);
    this.topicsKey = smsTopicsKey(this, 'TopicsKey', props.retain);
    const smsEvents = props.stateful.queues['sms-events'];
    this.queue = smsEvents.queue;
    const topic = new SmsTopic(this, 'Events', {
      topicName: smsEventsTopicName(props.stage),
      key: this.topicsKey,
      sourceArn: smsVoiceArn(this, `configuration-set/${this.configurationSetName}`),
      queue: smsEvents.queue,
      deadLettersName: resourceName(props.stage, 'sms-events-undelivered'),
      retain: props.retain,
    });
    this.topic = topic.topic;
    this.undelivered = topic.deadLetters;
    this.undeliveredAlarm = deadLetterAlarm(
      this,
      'UndeliveredAlarm',
      { deadLetterQueue: topic.deadLetters },
      {
        alarmName: resourceName(props.stage, 'sms-events-undelivered-messages'),
        description:
          "SMS delivery events SNS could not deliver to the sms-events queue are in sms-events-undelivered (the message's attributes say why). Fix the cause, then send each message's body to the sms-events queue (the write is idempotent).",
        topic: props.alarmTopic,
      },
    );
    this.configurationSet = new smsvoice.CfnConfigurationSet(this, 'ConfigurationSet', {
      configurationSetName: this.configurationSetName,
      eventDestinations: [
        {
          eventDestinationName: 'switchboard-sms-events',
          enabled: true,
          matchingEventTypes: [...SMS_EVENT_TYPES],
          snsDestination: { topicArn: this.topic.topicArn },
        },
      ],
    });
    // The service checks that it may publish when the destination is made.
    this.configurationSet.node.addDependency(this.topic);

    this.handler = new SwitchboardFunction(this, 'Handler', {
      spec: functions['sms-events'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    }).bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar, {
      reads: { actions: [] },
      writes: { actions: ['dynamodb:UpdateItem'] },
    });
    this.handler.consumeQueue(smsEvents.queue, smsEvents.spec);

    this.queueDeadLettersAlarm = deadLetterAlarm(this, 'QueueDlqAlarm', smsEvents, {
      alarmName: resourceName(props.stage, 'sms-events-dlq-messages'),
      description:
        "SMS delivery events failed five times in sms-events (tasks' SMS states) and are in the sms-events dead-letter queue. Fix the cause in the sms-events logs, then redrive with the stack output SmsEventsDlqRedriveCommand (the write is idempotent).",
      topic: props.alarmTopic,
    });
    redriveCommandOutput(this, 'SmsEventsDlqRedriveCommand', 'SmsEventsDlqRedriveCommand', smsEvents);
    new CfnOutput(this, 'ConfigurationSetName', {
      key: 'SmsConfigurationSetName',
      description:
        'The End User Messaging SMS configuration set SMS jobs send with (its events reach sms-events)',
      value: this.configurationSetName,
    });
  }
}
