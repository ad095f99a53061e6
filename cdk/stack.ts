/** The Switchboard stack: one stack, a construct per capability. */
import { Lazy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { UNSUBSCRIBE_BASE_PATH } from '#shared/routes.ts';
import { TWILIO_STATUS_PATH } from '#shared/telephony/twilio.ts';
import { BrokerFleet } from './constructs/broker-fleet.ts';
import { CallStatus } from './constructs/call-status.ts';
import { ConnectEvents } from './constructs/connect-events.ts';
import { OperatorConsole } from './constructs/console.ts';
import { EmailEvents } from './constructs/email-events.ts';
import { EmailUnsubscribe } from './constructs/email-unsubscribe.ts';
import { SwitchboardFunction } from './constructs/function.ts';
import { SwitchboardHttpApi } from './constructs/http-api.ts';
import { Jobs } from './constructs/jobs.ts';
import { Operations } from './constructs/operations.ts';
import { OutcomeWebhooks } from './constructs/outcome-webhooks.ts';
import { SmsEvents } from './constructs/sms-events.ts';
import { SmsInbound } from './constructs/sms-inbound.ts';
import { StatefulResources } from './constructs/stateful.ts';
import { Webhooks } from './constructs/webhooks.ts';
import type { DeploySettings } from './settings.ts';

export interface SwitchboardStackProps extends StackProps {
  readonly settings: DeploySettings;
}

export class SwitchboardStack extends Stack {
  readonly stateful: StatefulResources;
  readonly webhooks: Webhooks;
  readonly api: SwitchboardHttpApi;
  readonly jobs: Jobs;
  readonly fleet: BrokerFleet;
  readonly callStatus: CallStatus;
  /** Present when the stack is given Amazon Connect instances (`-c connectInstanceIds`). */
  readonly connectEvents: ConnectEvents | undefined;
  readonly operations: Operations;
  readonly console: OperatorConsole;
  readonly outcomeWebhooks: OutcomeWebhooks;
  /** One-click unsubscribe: the links' signing keys and the function behind their route. */
  readonly emailUnsubscribe: EmailUnsubscribe;
  /** SES's configuration set for email jobs, and its events into the tasks and suppression lists. */
  readonly emailEvents: EmailEvents;
  /** End User Messaging SMS's configuration set, and its delivery events into the tasks. */
  readonly smsEvents: SmsEvents;
  /** Customers' texts back (two-way SMS): opt-out keywords into the suppression lists. */
  readonly smsInbound: SmsInbound;

  constructor(scope: Construct, id: string, props: SwitchboardStackProps) {
    super(scope, id, props);
    const { stage, retain, telephonyProvider: provider } = props.settings;
    this.stateful = new StatefulResources(this, 'Stateful', {
      stage,
      retain,
      uploadOrigins: props.settings.uploadOrigins,
    });
    this.webhooks = new Webhooks(this, 'Webhooks', { stage, stateful: this.stateful, retain });
    // The brokers need the callback URL and the API needs the call-status function, which lives in
    // the brokers' VPC: the URL is built from the API's endpoint, known only as a token here.
    const apiUrl = new SwitchboardHttpApiUrl();
    const twilioCallbackUrl = props.settings.twilioCallbackUrl ?? apiUrl.lazy(TWILIO_STATUS_PATH);
    this.fleet = new BrokerFleet(this, 'Fleet', {
      stage,
      stateful: this.stateful,
      retain,
      telephonyApiUrl: props.settings.telephonyApiUrl,
      callStatusCallbackUrl: apiUrl.lazy(`/providers/${provider}/calls/status`),
      twilioCallbackUrl,
      connectInstanceIds: props.settings.connectInstanceIds,
      maxBrokers: props.settings.maxBrokers,
      alarmTopic: this.webhooks.alarmTopic,
    });
    // The operator API nudges brokers (pause / cancel of a message job): it lives in their VPC.
    this.jobs = new Jobs(this, 'Jobs', {
      stage,
      stateful: this.stateful,
      fleet: this.fleet,
      retain,
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.outcomeWebhooks = new OutcomeWebhooks(this, 'OutcomeWebhooks', {
      stage,
      stateful: this.stateful,
      retain,
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.emailEvents = new EmailEvents(this, 'EmailEvents', {
      stage,
      stateful: this.stateful,
      retain,
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.smsEvents = new SmsEvents(this, 'SmsEvents', {
      stage,
      stateful: this.stateful,
      retain,
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.smsInbound = new SmsInbound(this, 'SmsInbound', {
      stage,
      stateful: this.stateful,
      retain,
      topicsKey: this.smsEvents.topicsKey,
      alarmTopic: this.webhooks.alarmTopic,
    });
    this.callStatus = new CallStatus(this, 'CallStatus', {
      stateful: this.stateful,
      fleet: this.fleet,
      retain,
      provider,
      twilioCallbackUrl,
    });
    const connectInstanceIds = props.settings.connectInstanceIds;
    this.connectEvents =
      connectInstanceIds.length > 0
        ? new ConnectEvents(this, 'ConnectEvents', {
            stateful: this.stateful,
            fleet: this.fleet,
            retain,
            instanceIds: connectInstanceIds,
          })
        : undefined;
    this.console = new OperatorConsole(this, 'Console', { stage, retain });
    this.emailUnsubscribe = new EmailUnsubscribe(this, 'EmailUnsubscribe', {
      stage,
      stateful: this.stateful,
      retain,
      baseUrl: apiUrl.lazy(UNSUBSCRIBE_BASE_PATH),
    });
    this.fleet.sendEmail({
      configurationSetName: this.emailEvents.configurationSetName,
      unsubscribe: this.emailUnsubscribe,
    });
    this.fleet.sendSms({ configurationSetName: this.smsEvents.configurationSetName });
    this.api = new SwitchboardHttpApi(this, 'Api', {
      stage,
      handlers: {
        'webhook-receiver': this.webhooks.receiver,
        'jobs-api': this.jobs.api,
        'channels-api': this.webhooks.channelsApi,
        'call-status': this.callStatus.handler,
        console: this.console.files,
        unsubscribe: this.emailUnsubscribe.handler,
      },
      jwtAuthorizer: this.console.jwtAuthorizer,
      alarmTopic: this.webhooks.alarmTopic,
    });
    apiUrl.resolveWith(this.api);
    this.webhooks.publishWebhookUrl(this.api);
    this.operations = new Operations(this, 'Operations', {
      stage,
      alarmTopic: this.webhooks.alarmTopic,
      fleet: this.fleet,
      functions: {
        receiver: this.webhooks.receiver,
        processor: this.webhooks.processor,
        ingest: this.jobs.ingest,
        jobManager: this.fleet.jobManager,
      },
      allFunctions: this.node
        .findAll()
        .filter((c): c is SwitchboardFunction => c instanceof SwitchboardFunction),
      queues: this.stateful.queues,
      streamFailures: this.outcomeWebhooks.streamFailures,
    });
  }
}

/** An API URL needed before the API exists: a lazy string resolved once the API is built. */
class SwitchboardHttpApiUrl {
  private api: SwitchboardHttpApi | undefined;
  resolveWith(api: SwitchboardHttpApi): void {
    this.api = api;
  }
  lazy(path: string): string {
    return Lazy.string({
      produce: () => {
        if (!this.api) throw new Error('the HTTP API was never built');
        return this.api.urlOf(path);
      },
    });
  }
}
