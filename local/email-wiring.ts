/**
 * Email on the local cloud, wired as deployed: the SES v2 stand-in (`./ses-emulator.ts`) with the
 * stage's configuration set (`switchboard-{stage}-email`, publishing the event types the stack's
 * event destination publishes), whose EventBridge destination hands each event to the rule the
 * stack has (`emailEventPattern`: SES's events of that configuration set), the rule to its target,
 * the `ses-events` queue (the event as the message body, as EventBridge's SQS target sends it; a
 * failed send is retried by the stand-in, as EventBridge retries), and the queue to the deployed
 * email-events handler (`lambdas/email-events/main.ts`) in batches, through the local event source
 * mapping (`./sqs-poller.ts`: batch size and window from `shared/functions.ts`, partial failures).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import {
  EMAIL_EVENT_TYPES,
  emailConfigurationSetName,
  matchesEmailEventRule,
} from '#shared/email/event-destination.ts';
import { functions } from '#shared/functions.ts';
import { cloudEnv, LOCAL_CREDENTIALS, type LocalCloudInfo } from './cloud.ts';
import type { Handler } from './lambda.ts';
import { RecordedEvents, startQueueMapping } from './queue-target.ts';
import { type SesEmulator, type SesEmulatorOptions, startSesEmulator } from './ses-emulator.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

export interface LocalEmailOptions {
  readonly cloud: LocalCloudInfo;
  readonly log?: (line: string) => void;
  /** The stand-in's settings (account, identities, faults, clock …); its configuration sets are the stage's. */
  readonly ses?: Omit<SesEmulatorOptions, 'deliver' | 'configurationSets'>;
}

export interface LocalEmail {
  /** The SES v2 stand-in: point `SESv2Client`'s `endpoint` at `ses.url`. */
  readonly ses: SesEmulator;
  /** The configuration set email sends name (`SES_CONFIGURATION_SET`), as the stack names it. */
  readonly configurationSet: string;
  /** Resolves once every event published so far has reached the queue and email-events has recorded it. */
  recorded(): Promise<void>;
  stop(): Promise<void>;
}

/** Imports the email-events function's `main.ts` (after its environment is set) and returns its handler. */
async function loadHandler(): Promise<Handler<SQSEvent, unknown>> {
  const entry = pathToFileURL(path.join(ROOT, functions['email-events'].entry)).href;
  return ((await import(entry)) as { handler: Handler<SQSEvent, unknown> }).handler;
}

/**
 * Loads the email-events handler (variables not set yet are taken from the cloud: it reads them at
 * import) and starts the SES stand-in delivering to it.
 */
export async function startLocalEmail(options: LocalEmailOptions): Promise<LocalEmail> {
  const { cloud } = options;
  const log = options.log ?? (() => {});
  for (const [name, value] of Object.entries(cloudEnv(cloud))) process.env[name] ??= value;
  // As the local stack sets them for every handler: warnings only, no metric records.
  process.env.LOG_LEVEL ??= 'warn';
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const spec = functions['email-events'];
  const tracker = new RecordedEvents(await loadHandler());
  const configurationSet = emailConfigurationSetName(cloud.stage);
  const source = spec.queueSource!;
  const queue = cloud.queues[source.queue]!;
  const sqs = new SQSClient({
    region: cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: cloud.sqsEndpoint,
  });
  const poller = startQueueMapping(cloud, sqs, 'email-events', tracker.handler, log);
  const ses = await startSesEmulator({
    ...options.ses,
    configurationSets: { [configurationSet]: { eventTypes: EMAIL_EVENT_TYPES } },
    // The rule: events of other configuration sets, or of types it does not match, go nowhere; the
    // others to its target, the queue.
    deliver: async (event) => {
      if (!matchesEmailEventRule(event, configurationSet)) return;
      const sent = await sqs.send(
        new SendMessageCommand({ QueueUrl: queue.url, MessageBody: JSON.stringify(event) }),
      );
      tracker.queued(sent.MessageId!);
    },
  });
  const outbox = ses.outbox === undefined ? '' : `; each email sent is written to ${ses.outbox}`;
  log(
    `Amazon SES      ${ses.url} (SES v2 stand-in: sends, refusals, faults; ${configurationSet}'s events → ${source.queue} → email-events${outbox})`,
  );
  return {
    ses,
    configurationSet,
    recorded: async () => {
      await ses.idle();
      await tracker.drained();
    },
    stop: async () => {
      await ses.close();
      await poller.stop();
      sqs.destroy();
    },
  };
}
