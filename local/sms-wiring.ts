/**
 * SMS on the local cloud, wired as deployed (`cdk/constructs/sms-events.ts`, `sms-inbound.ts`): the
 * End User Messaging SMS stand-in (`./sms-emulator.ts`) with the stage's configuration set
 * (`switchboard-{stage}-sms`, publishing the event types the stack's destination publishes), whose
 * SNS destination hands each event record to the `sms-events` queue as the topic's subscription
 * does with raw message delivery (the record's JSON is the message body; a failed send is retried
 * by the stand-in, as SNS retries), the queue to the deployed sms-events handler
 * (`lambdas/sms-events/main.ts`) in batches through the local event source mapping; and its
 * numbers' two-way channel (`sms.reply(from, to, body)`) handing each customer's text to the
 * `sms-inbound` queue the same way, read by the deployed sms-inbound handler.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { type FunctionId, functions } from '#shared/functions.ts';
import { SMS_EVENT_TYPES, smsConfigurationSetName } from '#shared/sms/event-destination.ts';
import { cloudEnv, LOCAL_CREDENTIALS, type LocalCloudInfo } from './cloud.ts';
import type { Handler } from './lambda.ts';
import { RecordedEvents, startQueueMapping } from './queue-target.ts';
import {
  type MatchingEventType,
  type SmsEmulator,
  type SmsEmulatorOptions,
  startSmsEmulator,
} from './sms-emulator.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

export interface LocalSmsOptions {
  readonly cloud: LocalCloudInfo;
  readonly log?: (line: string) => void;
  /** The stand-in's settings (identities, opt-out lists, outcomes, faults, clock …); its configuration sets are the stage's. */
  readonly sms?: Omit<SmsEmulatorOptions, 'deliver' | 'deliverInbound' | 'configurationSets'>;
}

export interface LocalSms {
  /** The End User Messaging SMS stand-in: point the SDK client's `endpoint` at `sms.url`. */
  readonly sms: SmsEmulator;
  /** The configuration set texts name, as the stack names it. */
  readonly configurationSet: string;
  /** Resolves once every event and inbound text published so far has reached its queue and been recorded. */
  recorded(): Promise<void>;
  stop(): Promise<void>;
}

/** Imports a function's `main.ts` (after its environment is set) and returns its handler. */
async function loadHandler(id: FunctionId): Promise<Handler<SQSEvent, unknown>> {
  const entry = pathToFileURL(path.join(ROOT, functions[id].entry)).href;
  return ((await import(entry)) as { handler: Handler<SQSEvent, unknown> }).handler;
}

/** A subscription with raw message delivery: the payload's JSON sent to the function's queue. */
class RawSubscription {
  readonly tracker: RecordedEvents;
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;

  constructor(sqs: SQSClient, queueUrl: string, tracker: RecordedEvents) {
    this.#sqs = sqs;
    this.#queueUrl = queueUrl;
    this.tracker = tracker;
  }

  async deliver(payload: unknown): Promise<void> {
    const sent = await this.#sqs.send(
      new SendMessageCommand({ QueueUrl: this.#queueUrl, MessageBody: JSON.stringify(payload) }),
    );
    this.tracker.queued(sent.MessageId!);
  }
}

/**
 * Loads the sms-events and sms-inbound handlers (variables not set yet are taken from the cloud:
 * they read them at import) and starts the stand-in delivering to them.
 */
export async function startLocalSms(options: LocalSmsOptions): Promise<LocalSms> {
  const { cloud } = options;
  const log = options.log ?? (() => {});
  for (const [name, value] of Object.entries(cloudEnv(cloud))) process.env[name] ??= value;
  process.env.LOG_LEVEL ??= 'warn';
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const sqs = new SQSClient({
    region: cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.sqsEndpoint,
  });
  const subscription = async (id: 'sms-events' | 'sms-inbound') => {
    const tracker = new RecordedEvents(await loadHandler(id));
    const queue = cloud.queues[functions[id].queueSource!.queue]!;
    const poller = startQueueMapping(cloud, sqs, id, tracker.handler, log);
    return { subscription: new RawSubscription(sqs, queue.url, tracker), poller };
  };
  const events = await subscription('sms-events');
  const inbound = await subscription('sms-inbound');
  const configurationSet = smsConfigurationSetName(cloud.stage);
  const sms = await startSmsEmulator({
    ...options.sms,
    configurationSets: { [configurationSet]: { eventTypes: SMS_EVENT_TYPES as MatchingEventType[] } },
    deliver: (event) => events.subscription.deliver(event),
    deliverInbound: (text) => inbound.subscription.deliver(text),
  });
  log(
    `End User SMS    ${sms.url} (End User Messaging SMS stand-in: sends, opt-outs, faults; ${configurationSet}'s events → sms-events, texts back → sms-inbound)`,
  );
  return {
    sms,
    configurationSet,
    recorded: async () => {
      await sms.idle();
      await Promise.all([events.subscription.tracker.drained(), inbound.subscription.tracker.drained()]);
    },
    stop: async () => {
      await sms.close();
      await Promise.all([events.poller.stop(), inbound.poller.stop()]);
      sqs.destroy();
    },
  };
}
