/**
 * Email on the local cloud, wired as deployed: the SES v2 stand-in (`./ses-emulator.ts`) with the
 * stage's configuration set (`switchboard-{stage}-email`, publishing the event types the stack's
 * event destination publishes), whose EventBridge destination hands each event to the rule the
 * stack has (`emailEventPattern`: SES's events of that configuration set) and the rule to the
 * deployed email-events handler (`lambdas/email-events/main.ts`), invoked as Lambda's asynchronous
 * invocation would: a failure is retried by the far side (the stand-in retries as EventBridge does).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  EMAIL_EVENT_TYPES,
  emailConfigurationSetName,
  matchesEmailEventRule,
} from '#shared/email/event-destination.ts';
import { functions } from '#shared/functions.ts';
import { cloudEnv, type LocalCloudInfo } from './cloud.ts';
import { type Handler, invokeHandler } from './lambda.ts';
import {
  type EventBridgeEvent,
  type SesEmulator,
  type SesEmulatorOptions,
  startSesEmulator,
} from './ses-emulator.ts';

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
  stop(): Promise<void>;
}

/** Imports the email-events function's `main.ts` (after its environment is set) and returns its handler. */
async function loadHandler(): Promise<Handler<EventBridgeEvent, unknown>> {
  const entry = pathToFileURL(path.join(ROOT, functions['email-events'].entry)).href;
  return ((await import(entry)) as { handler: Handler<EventBridgeEvent, unknown> }).handler;
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
  const handler = await loadHandler();
  const configurationSet = emailConfigurationSetName(cloud.stage);
  const ses = await startSesEmulator({
    ...options.ses,
    configurationSets: { [configurationSet]: { eventTypes: EMAIL_EVENT_TYPES } },
    // The rule: events of other configuration sets, or of types it does not match, go nowhere.
    deliver: async (event) => {
      if (!matchesEmailEventRule(event, configurationSet)) return;
      await invokeHandler(handler, event, { functionName: spec.id, timeoutMs: spec.timeoutSeconds * 1000 });
    },
  });
  const outbox = ses.outbox === undefined ? '' : `; each email sent is written to ${ses.outbox}`;
  log(
    `Amazon SES      ${ses.url} (SES v2 stand-in: sends, refusals, faults; ${configurationSet}'s events → email-events${outbox})`,
  );
  return { ses, configurationSet, stop: () => ses.close() };
}
