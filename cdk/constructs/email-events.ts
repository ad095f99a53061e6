/**
 * SES's sending events into Switchboard (`shared/email/event-destination.ts`): the stack's SES
 * configuration set, which every email job's send names (the broker's `SES_CONFIGURATION_SET`,
 * {@link EmailEvents.configurationSetName}); its event destination, the account's default EventBridge
 * bus, for the seven event types that move an email's state; and a rule on that bus, filtered to
 * this configuration set, targeting the email-events function, which records each event on its task
 * and puts permanently bounced and complaining addresses on the client's suppression list.
 *
 * No event is lost quietly: EventBridge retries invoking the function for 24 hours (185 attempts, its
 * maximum: unlike Amazon Connect's contact events, nothing reconciles a lost SES event), Lambda
 * retries a failed invocation twice, and what is still undelivered or failing goes to one dead-letter
 * queue, alarmed (`switchboard-{stage}-email-events-dlq-messages`). The rule's and the function's
 * dead letters have the same body there, the EventBridge event, with the error in the message's
 * attributes; both writes are idempotent, so once the cause is fixed an operator re-invokes the
 * function with each body (`aws lambda invoke --invocation-type Event --payload …`; `aws.ses` events
 * cannot be put back on a bus).
 */
import { CfnOutput, Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
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
import { SwitchboardFunction } from './function.ts';
import { deadLetterAlarm, type StatefulResources } from './stateful.ts';

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
  /** Events the rule could not deliver, and invocations that still failed after Lambda's retries. */
  readonly deadLetters: sqs.Queue;
  readonly deadLettersAlarm: cloudwatch.Alarm;

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
          "This queue is the dead-letter queue of the email-events rule's target and of the function's asynchronous invocations: nothing consumes it but an operator re-invoking the function, so it needs no DLQ of its own.",
      },
    ]);

    this.handler = this.#eventsFunction(props);
    this.rule = new events.Rule(this, 'SesEvents', {
      description: `SES sending events of the ${this.configurationSetName} configuration set → email-events`,
      eventPattern: emailEventPattern(this.configurationSetName),
      targets: [
        new targets.LambdaFunction(this.handler, {
          retryAttempts: 185,
          maxEventAge: Duration.hours(24),
          deadLetterQueue: this.deadLetters,
        }),
      ],
    });

    this.deadLettersAlarm = deadLetterAlarm(
      this,
      'DlqAlarm',
      { deadLetterQueue: this.deadLetters },
      {
        alarmName: resourceName(props.stage, 'email-events-dlq-messages'),
        description:
          "SES email events could not be recorded (tasks' email states, bounce and complaint suppressions) and are in the email-events dead-letter queue. Fix the cause in the email-events logs, then re-invoke the function with each message's body (both writes are idempotent).",
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
   * `SUPPRESS#` in the control table; no read of either.
   */
  #eventsFunction(props: EmailEventsProps): SwitchboardFunction {
    const fn = new SwitchboardFunction(this, 'Handler', {
      spec: functions['email-events'],
      logRemovalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      invocation: { asyncRetryAttempts: 2, maxEventAge: Duration.hours(6) },
    })
      .bindTable(props.stateful.tables.tasks, 'readwrite', tableSpec('tasks').envVar, {
        reads: { actions: [] },
        writes: { actions: ['dynamodb:UpdateItem'] },
      })
      .bindTable(props.stateful.tables.control, 'readwrite', tableSpec('control').envVar, {
        reads: { actions: [] },
        writes: { actions: ['dynamodb:UpdateItem'], leadingKeys: [suppressionKeys.pk('*')] },
      });
    // The function's own dead-letter queue rather than an on-failure destination: its messages then
    // carry the event itself, as the rule's dead letters do, so one queue holds one shape. Set on the
    // L1 resource, as the shared function construct does not take a DLQ.
    (fn.node.defaultChild as lambda.CfnFunction).deadLetterConfig = {
      targetArn: this.deadLetters.queueArn,
    };
    fn.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.deadLetters.queueArn] }),
    );
    return fn;
  }
}
