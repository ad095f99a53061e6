/**
 * SES's sending events into Switchboard (`shared/email/event-destination.ts`): the stack's SES
 * configuration set, which every email job's send names (the broker's `SES_CONFIGURATION_SET`,
 * {@link EmailEvents.configurationSetName}); its event destination, the account's default EventBridge
 * bus, for the seven event types that move an email's state; and a rule on that bus, filtered to
 * this configuration set, targeting the `ses-events` queue, which the email-events function reads in
 * batches (an invocation a batch of up to 200, not one an event): it records each event on its task
 * and puts permanently bounced and complaining addresses on the client's suppression list.
 *
 * No event is lost quietly: EventBridge retries sending to the queue for 24 hours (185 attempts, its
 * maximum: unlike Amazon Connect's contact events, nothing reconciles a lost SES event), then puts
 * the event in the rule's dead-letter queue (`switchboard-{stage}-email-events-dlq`); a record the
 * function fails five receives in a row goes to the queue's own (`switchboard-{stage}-ses-events-dlq`).
 * Both are alarmed, and both hold the EventBridge event as the message body; both writes are
 * idempotent, so once the cause is fixed an operator puts the messages back on `ses-events`: the
 * queue's own dead letters with SQS's redrive (stack output `SesEventsDlqRedriveCommand`), the rule's
 * by sending each body to the queue (SQS moves messages only out of a queue's configured DLQ; and
 * `aws.ses` events cannot be put back on a bus).
 */
import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as ses from 'aws-cdk-lib/aws-ses';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { NagSuppressions } from 'cdk-nag';
import { Construct } from 'constructs';
import {
  EMAIL_EVENT_TYPES,
  type EmailEventType,
  emailConfigurationSetName,
  emailEventPattern,
} from '#shared/email/event-destination.ts';
import { functions } from '#shared/functions.ts';
import { resourceName, tableSpec } from '#shared/resources.ts';
import { suppressionKeys } from '#shared/suppressions/model.ts';

/** The control table's client partitions, whose `JOB#` items hold the jobs (`keys.job`). */
const JOB_KEYS = 'CLIENT#*';

import { SwitchboardFunction } from './function.ts';
import { deadLetterAlarm, redriveCommandOutput, type StatefulResources } from './stateful.ts';

export interface EmailEventsProps {
  readonly stage: string;
  readonly stateful: StatefulResources;
  /** Keep the log group and the dead letters when the stack is deleted (production: yes). */
  readonly retain: boolean;
  /** Where the dead-letter alarm notifies. */
  readonly alarmTopic: sns.ITopic;
}

/** SES v2's event type names → CDK's. */
const CDK_EVENT: Readonly<Record<EmailEventType, ses.EmailSendingEvent>> = {
  SEND: ses.EmailSendingEvent.SEND,
  DELIVERY: ses.EmailSendingEvent.DELIVERY,
  BOUNCE: ses.EmailSendingEvent.BOUNCE,
  COMPLAINT: ses.EmailSendingEvent.COMPLAINT,
  REJECT: ses.EmailSendingEvent.REJECT,
  DELIVERY_DELAY: ses.EmailSendingEvent.DELIVERY_DELAY,
  RENDERING_FAILURE: ses.EmailSendingEvent.RENDERING_FAILURE,
};

export class EmailEvents extends Construct {
  readonly configurationSet: ses.ConfigurationSet;
  /** The configuration set's name: what the broker's sends name (`SES_CONFIGURATION_SET`). */
  readonly configurationSetName: string;
  readonly handler: SwitchboardFunction;
  readonly rule: events.Rule;
  /** The rule's target, which the function reads in batches (`ses-events` of `shared/resources.ts`). */
  readonly queue: sqs.IQueue;
  /** Events the rule could not send to the queue. */
  readonly deadLetters: sqs.Queue;
  readonly deadLettersAlarm: cloudwatch.Alarm;
  /** Records the function failed on every receive (the queue's own dead-letter queue). */
  readonly queueDeadLettersAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: EmailEventsProps) {
    super(scope, id);
    const removalPolicy = props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.configurationSetName = emailConfigurationSetName(props.stage);
    this.configurationSet = new ses.ConfigurationSet(this, 'ConfigurationSet', {
      configurationSetName: this.configurationSetName,
    });
    this.configurationSet.addEventDestination('ToEventBridge', {
      destination: ses.EventDestination.eventBus(
        events.EventBus.fromEventBusName(this, 'DefaultBus', 'default'),
      ),
      events: EMAIL_EVENT_TYPES.map((type) => CDK_EVENT[type]),
    });

    this.deadLetters = new sqs.Queue(this, 'DeadLetters', {
      queueName: resourceName(props.stage, 'email-events-dlq'),
      removalPolicy,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    NagSuppressions.addResourceSuppressions(this.deadLetters, [
      {
        id: 'AwsSolutions-SQS3',
        reason:
          "This queue is the dead-letter queue of the email-events rule's target: nothing consumes it but an operator moving its messages back to ses-events, so it needs no DLQ of its own.",
      },
    ]);

    const sesEvents = props.stateful.queues['ses-events'];
    this.queue = sesEvents.queue;
    this.handler = this.#eventsFunction(props);
    this.handler.consumeQueue(sesEvents.queue, sesEvents.spec);
    this.rule = new events.Rule(this, 'SesEvents', {
      description: `SES sending events of the ${this.configurationSetName} configuration set → ses-events → email-events`,
      eventPattern: emailEventPattern(this.configurationSetName),
      targets: [
        new targets.SqsQueue(sesEvents.queue, {
          retryAttempts: 185,
          maxEventAge: Duration.hours(24),
          deadLetterQueue: this.deadLetters,
        }),
      ],
    });
    this.queueDeadLettersAlarm = deadLetterAlarm(this, 'QueueDlqAlarm', sesEvents, {
      alarmName: resourceName(props.stage, 'ses-events-dlq-messages'),
      description:
        "SES email events failed five times in email-events (tasks' email states, bounce and complaint suppressions) and are in the ses-events dead-letter queue. Fix the cause in the email-events logs, then redrive with the stack output SesEventsDlqRedriveCommand (both writes are idempotent).",
      topic: props.alarmTopic,
    });
    redriveCommandOutput(this, 'SesEventsDlqRedriveCommand', 'SesEventsDlqRedriveCommand', sesEvents);

    this.deadLettersAlarm = deadLetterAlarm(
      this,
      'DlqAlarm',
      { deadLetterQueue: this.deadLetters },
      {
        alarmName: resourceName(props.stage, 'email-events-dlq-messages'),
        description:
          "SES email events could not be sent to the ses-events queue and are in the email-events dead-letter queue (the message's attributes say why). Fix the cause, then send each message's body to the ses-events queue (both writes are idempotent).",
        topic: props.alarmTopic,
      },
    );

    new CfnOutput(this, 'ConfigurationSetName', {
      key: 'EmailConfigurationSetName',
      description: "The SES configuration set email jobs send with (the broker's SES_CONFIGURATION_SET)",
      value: this.configurationSetName,
    });
  }

  /**
   * The function: an UpdateItem on task items, and the suppression entries' UpdateItem under
   * `SUPPRESS#` in the control table. For a hard bounce, a GetItem of the task; for one of a
   * fallback job, a GetItem of its job (`CLIENT#`) and the transaction that opens the task again on
   * its next channel: the task's UpdateItem, the ConditionCheckItem of its claim page, the job's
   * UpdateItem (`shared/adapters/dynamo-task-reopen.ts`).
   */
  #eventsFunction(props: EmailEventsProps): SwitchboardFunction {
    return new SwitchboardFunction(this, 'Handler', {
      spec: functions['email-events'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    })
      .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar, {
        reads: { actions: ['dynamodb:GetItem'] },
        writes: { actions: ['dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'] },
      })
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        reads: { actions: ['dynamodb:GetItem'], leadingKeys: [JOB_KEYS] },
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: [suppressionKeys.pk('*'), JOB_KEYS] },
      });
  }
}
