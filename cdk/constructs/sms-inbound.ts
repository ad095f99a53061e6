/**
 * Customers' texts back (two-way SMS) into Switchboard: an SNS topic (`./sms-topic.ts`:
 * KMS-encrypted with the SMS topics' key, the service may publish for this account's numbers and
 * pools only), the `sms-inbound` queue subscribed with raw message delivery, and the sms-inbound
 * function reading it in batches: an opt-out keyword puts the sender's number on the suppression
 * list of the clients sending from the number it was texted to.
 *
 * A number's two-way channel is set on the number, not in this stack (numbers are bought and
 * registered outside it): `aws pinpoint-sms-voice-v2 update-phone-number --phone-number-id … \
 * --two-way-enabled --two-way-channel-arn <SmsInboundTopicArn>` (stack output).
 *
 * The function reads the clients' settings through the control table's `byStatus` index, in its
 * `CLIENTS` partition only, and writes suppression entries (`SUPPRESS#…`), nothing else.
 */
import { CfnOutput, RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { CLIENT_LIST_KEY, CLIENTS_INDEX } from '#shared/adapters/dynamo-sms-numbers.ts';
import { functions } from '#shared/functions.ts';
import { resourceName, tableSpec } from '#shared/resources.ts';
import { smsInboundTopicName } from '#shared/sms/event-destination.ts';
import { suppressionKeys } from '#shared/suppressions/model.ts';
import { SwitchboardFunction } from './function.ts';
import { SmsTopic, smsVoiceArn } from './sms-topic.ts';
import { deadLetterAlarm, redriveCommandOutput, type StatefulResources } from './stateful.ts';

export interface SmsInboundProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  readonly retain: boolean;
  /** The SMS topics' key (`SmsEvents.topicsKey`). */
  readonly topicsKey: kms.IKey;
  readonly alarmTopic: sns.ITopic;
}

export class SmsInbound extends Construct {
  readonly topic: sns.Topic;
  readonly handler: SwitchboardFunction;
  readonly queue: sqs.IQueue;
  readonly queueDeadLettersAlarm: cloudwatch.Alarm;
  /** Texts SNS could not deliver to the queue (the subscription's dead-letter queue), and its alarm. */
  readonly undelivered: sqs.IQueue;
  readonly undeliveredAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: SmsInboundProps) {
    super(scope, id);
    const inbound = props.stateful.queues['sms-inbound'];
    this.queue = inbound.queue;
    const texts = new SmsTopic(this, 'Texts', {
      topicName: smsInboundTopicName(props.stage),
      key: props.topicsKey,
      sourceArn: smsVoiceArn(this, '*'),
      queue: inbound.queue,
      deadLettersName: resourceName(props.stage, 'sms-inbound-undelivered'),
      retain: props.retain,
    });
    this.topic = texts.topic;
    this.undelivered = texts.deadLetters;
    this.undeliveredAlarm = deadLetterAlarm(
      this,
      'UndeliveredAlarm',
      { deadLetterQueue: texts.deadLetters },
      {
        alarmName: resourceName(props.stage, 'sms-inbound-undelivered-messages'),
        description:
          "Customers' texts back SNS could not deliver to the sms-inbound queue are in sms-inbound-undelivered (the message's attributes say why). Fix the cause, then send each message's body to the sms-inbound queue (the write is idempotent).",
        topic: props.alarmTopic,
      },
    );

    const control = props.stateful.tables.control;
    this.handler = new SwitchboardFunction(this, 'Handler', {
      spec: functions['sms-inbound'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    }).bindTable(control, 'readwrite', tableSpec('control').envVar, {
      reads: { actions: [] },
      writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: [suppressionKeys.pk('*')] },
    });
    // The clients' list of the byStatus index, and no other of its partitions (jobs by status).
    this.handler.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: [`${control.tableArn}/index/${CLIENTS_INDEX}`],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [CLIENT_LIST_KEY] } },
      }),
    );
    this.handler.consumeQueue(inbound.queue, inbound.spec);

    this.queueDeadLettersAlarm = deadLetterAlarm(this, 'QueueDlqAlarm', inbound, {
      alarmName: resourceName(props.stage, 'sms-inbound-dlq-messages'),
      description:
        "Customers' texts back failed five times in sms-inbound (opt-outs not yet on the suppression list) and are in the sms-inbound dead-letter queue. Fix the cause in the sms-inbound logs, then redrive with the stack output SmsInboundDlqRedriveCommand (the write is idempotent).",
      topic: props.alarmTopic,
    });
    redriveCommandOutput(this, 'SmsInboundDlqRedriveCommand', 'SmsInboundDlqRedriveCommand', inbound);
    new CfnOutput(this, 'TopicArn', {
      key: 'SmsInboundTopicArn',
      description:
        "Set as each SMS number's two-way channel (update-phone-number --two-way-enabled --two-way-channel-arn): customers' texts back, STOP among them, reach sms-inbound",
      value: this.topic.topicArn,
    });
  }
}
