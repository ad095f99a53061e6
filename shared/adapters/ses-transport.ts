/**
 * Amazon SES v2's adapter of the message seam (`shared/campaign/transport.ts`), for email jobs.
 *
 * - A unit of several recipients (the content is an inline template SES can fill: `groupOf`) is one
 *   `SendBulkEmail` of up to 50 destinations, each entry with its own template data, its own
 *   `List-Unsubscribe` headers and its own tags; a unit of one (or a template SES cannot fill, see
 *   `sesTemplateContent`) is one `SendEmail` rendered here (`renderEmail`).
 * - Every email carries the tags `sb-client`, `sb-job`, `sb-task`, `sb-attempt`: the configuration
 *   set's events name the task and the attempt they are about (`lambdas/email-events`).
 * - SES takes no idempotency key, so the transport is not idempotent: an unanswered request is not
 *   resent (the pipeline waits for the SEND event, then ends the task `in-doubt`). The SES client
 *   must not retry either: make it with `makeSesClient` (`aws-clients.ts`: `maxAttempts: 1`).
 * - Answers: 200 → accepted (SES's acceptance is not delivery: `acceptedAs: 'accepted'`, its events
 *   say the rest); a bulk 200 → each entry's own status; HTTP 429 `TooManyRequestsException` and an
 *   entry's `ACCOUNT_THROTTLED` → wait and retry; `LimitExceededException` and
 *   `ACCOUNT_DAILY_QUOTA_EXCEEDED` → the daily quota (the job pauses and says so);
 *   `SendingPausedException`, `AccountSuspendedException` → held (every email job waits);
 *   `MessageRejected`, `MailFromDomainNotVerifiedException` and the other 4xx → final, with SES's
 *   reason; 5xx, a timeout, a dropped connection → in doubt (unless the connection was never made).
 *
 * Sources: SES API v2 reference, SendEmail, SendBulkEmail, BulkEmailEntryResult (the statuses),
 * "Errors" of each; developer guide "Using templates to send personalized email" (inline templates
 * in SendBulkEmail, 50 destinations a call) and "Managing your sending quotas".
 */
import {
  type BulkEmailEntry,
  type BulkEmailEntryResult,
  GetAccountCommand,
  type MessageHeader,
  type MessageTag,
  type SESv2Client,
  SendBulkEmailCommand,
  type SendBulkEmailCommandInput,
  SendEmailCommand,
  type SendEmailCommandInput,
} from '@aws-sdk/client-sesv2';
import type { ClaimedTask } from '#shared/campaign/ports.ts';
import type { SendUnit } from '#shared/campaign/send-queue.ts';
import {
  type EntryOutcome,
  type PreparedRequest,
  type TransportOutcome,
  UnpreparableError,
} from '#shared/campaign/transport.ts';
import { EMAIL_TAGS } from '#shared/email/email-outcomes.ts';
import {
  type EmailTemplate,
  MissingVariableError,
  renderEmail,
  SubjectLineBreakError,
  sesTemplateContent,
  sesTemplateData,
} from '#shared/email/template.ts';
import { listUnsubscribeHeaders } from '#shared/email/unsubscribe.ts';
import type { ServiceFailureRules } from './aws-send-failure.ts';
import { UnkeyedAwsTransport } from './unkeyed-aws-transport.ts';

export { EMAIL_TAGS };

import type { EmailSettings } from '#shared/jobs/model.ts';

/** SES's most destinations in one SendBulkEmail. */
export const SES_BULK_DESTINATIONS = 50;

/** The lane of every email request: the account's sending rate, counted in recipients. */
export const EMAIL_LANE = 'email';

export interface SesTransportOptions {
  readonly ses: SESv2Client;
  readonly clientId: string;
  readonly settings: EmailSettings;
  /** The configuration set when the client names none (the stack's, with its event destination). */
  readonly defaultConfigurationSet: string | undefined;
  /** Recipients per second: the account's `SendQuota.MaxSendRate` (or this broker's share of it). */
  readonly ratePerSecond: number;
  /**
   * The rate every client of the process takes its recipients from (SES's rate is the account's):
   * each request waits for its recipients there before it goes.
   */
  readonly sharedRate?: { take(recipients: number): Promise<void> };
  /** The one-click unsubscribe URL of a recipient of a job (RFC 8058); none: no such headers. */
  readonly unsubscribeUrl?: (request: { clientId: string; jobId: string; address: string }) => string;
}

type SesRequest =
  | { readonly kind: 'single'; readonly input: SendEmailCommandInput }
  | { readonly kind: 'bulk'; readonly input: SendBulkEmailCommandInput };

/** What SES's own exceptions mean (SendEmail's and SendBulkEmail's "Errors"). */
export const SES_FAILURES: ServiceFailureRules = {
  rateLimited: 'TooManyRequestsException',
  quotaUsedUp: { name: 'LimitExceededException', quota: 'daily', what: "SES's daily sending quota" },
  held: { names: ['SendingPausedException', 'AccountSuspendedException'], what: 'SES holds every send' },
};

export class SesTransport extends UnkeyedAwsTransport<EmailTemplate, SesRequest> {
  readonly #options: SesTransportOptions;

  constructor(options: SesTransportOptions) {
    super({
      channel: 'email',
      delivery: options.settings.delivery,
      limits: {
        recipientsPerRequest: SES_BULK_DESTINATIONS,
        lanes: { [EMAIL_LANE]: options.ratePerSecond },
        countsRecipients: true,
      },
      failures: SES_FAILURES,
    });
    this.#options = options;
  }

  /** Tasks of one job share a bulk send when SES can fill the template itself (per-entry data). */
  groupOf(template: EmailTemplate): string | undefined {
    try {
      sesTemplateContent(template);
    } catch {
      return undefined; // rendered here, one SendEmail a recipient
    }
    return 'bulk';
  }

  prepare(unit: SendUnit<EmailTemplate>): PreparedRequest<SesRequest> {
    const request: SesRequest =
      unit.endpoint === 'multicast'
        ? { kind: 'bulk', input: this.#bulk(unit.tasks) }
        : { kind: 'single', input: this.#single(unit.tasks[0]!) };
    return { lane: EMAIL_LANE, request };
  }

  /** The request's recipients taken from the process's share of the account's rate. */
  async ready(prepared: PreparedRequest<SesRequest>): Promise<void> {
    const { request } = prepared;
    await this.#options.sharedRate?.take(
      request.kind === 'single' ? 1 : request.input.BulkEmailEntries!.length,
    );
  }

  protected async request(request: SesRequest): Promise<TransportOutcome> {
    if (request.kind === 'single') {
      const out = await this.#options.ses.send(new SendEmailCommand(request.input));
      return { kind: 'delivered', requestId: out.MessageId };
    }
    const out = await this.#options.ses.send(new SendBulkEmailCommand(request.input));
    const results = out.BulkEmailEntryResults ?? [];
    return {
      kind: 'per-recipient',
      requestId: out.$metadata.requestId,
      entries: request.input.BulkEmailEntries!.map((_, i) => entryOutcome(results[i])),
    };
  }

  /** One recipient's email, rendered here. */
  #single(task: ClaimedTask<EmailTemplate>): SendEmailCommandInput {
    let email: ReturnType<typeof renderEmail>;
    try {
      email = renderEmail(task.template, task.variables);
    } catch (error) {
      throw unpreparable(error);
    }
    return {
      ...this.#envelope(),
      Destination: { ToAddresses: [task.recipient] },
      Content: {
        Simple: {
          Subject: { Data: email.subject, Charset: 'UTF-8' },
          Body: {
            ...(email.text === undefined ? {} : { Text: { Data: email.text, Charset: 'UTF-8' } }),
            ...(email.html === undefined ? {} : { Html: { Data: email.html, Charset: 'UTF-8' } }),
          },
          ...this.#headersOf(task),
        },
      },
      EmailTags: this.#tags(task),
    };
  }

  /** Up to 50 recipients of one job and attempt, one inline template, each entry its own data. */
  #bulk(tasks: readonly ClaimedTask<EmailTemplate>[]): SendBulkEmailCommandInput {
    const template = tasks[0]!.template;
    let entries: BulkEmailEntry[];
    try {
      entries = tasks.map((task) => ({
        Destination: { ToAddresses: [task.recipient] },
        ReplacementTags: this.#tags(task),
        ReplacementEmailContent: {
          ReplacementTemplate: { ReplacementTemplateData: sesTemplateData(template, task.variables) },
        },
        ...(() => {
          const headers = this.#headersOf(task).Headers;
          return headers ? { ReplacementHeaders: headers } : {};
        })(),
      }));
    } catch (error) {
      throw unpreparable(error);
    }
    return {
      ...this.#envelope(),
      DefaultContent: {
        Template: { TemplateContent: sesTemplateContent(template), TemplateData: '{}' },
      },
      BulkEmailEntries: entries,
    };
  }

  /** What every email of the client carries: From, Reply-To, the configuration set. */
  #envelope() {
    const { settings, defaultConfigurationSet: configurationSet } = this.#options;
    return {
      FromEmailAddress: fromAddress(settings),
      ...(settings.replyTo ? { ReplyToAddresses: [...settings.replyTo] } : {}),
      ...(configurationSet ? { ConfigurationSetName: configurationSet } : {}),
    };
  }

  #tags(task: ClaimedTask<EmailTemplate>): MessageTag[] {
    return [
      { Name: EMAIL_TAGS.client, Value: this.#options.clientId },
      { Name: EMAIL_TAGS.job, Value: task.jobId },
      { Name: EMAIL_TAGS.task, Value: task.taskId },
      { Name: EMAIL_TAGS.attempt, Value: String(task.attempt) },
    ];
  }

  /** The one-click unsubscribe headers of a recipient (RFC 8058), when the deployment has the route. */
  #headersOf(task: ClaimedTask<EmailTemplate>): { Headers?: MessageHeader[] } {
    const url = this.#options.unsubscribeUrl?.({
      clientId: this.#options.clientId,
      jobId: task.jobId,
      address: task.recipient,
    });
    if (url === undefined) return {};
    return {
      Headers: Object.entries(listUnsubscribeHeaders(url)).map(([Name, Value]) => ({ Name, Value })),
    };
  }
}

/** The From header: the address, with its display name (MIME encoded-word when not ASCII). */
export function fromAddress(settings: Pick<EmailSettings, 'from' | 'fromName'>): string {
  if (!settings.fromName) return settings.from;
  const ascii = /^[\x20-\x7e]*$/.test(settings.fromName);
  const name = ascii
    ? `"${settings.fromName}"`
    : `=?UTF-8?B?${Buffer.from(settings.fromName, 'utf8').toString('base64')}?=`;
  return `${name} <${settings.from}>`;
}

function unpreparable(error: unknown): UnpreparableError {
  if (error instanceof MissingVariableError)
    return new UnpreparableError(`missing-variable: ${error.variable}`, { cause: error });
  if (error instanceof SubjectLineBreakError)
    return new UnpreparableError(`bad-email: ${error.message}`, { cause: error });
  return new UnpreparableError(`bad-email: ${(error as Error).message}`, { cause: error });
}

/** One bulk destination's status as the pipeline reads it. */
function entryOutcome(result: BulkEmailEntryResult | undefined): EntryOutcome {
  const status = result?.Status;
  const reason = `${status ?? 'NO_STATUS'}${result?.Error ? `: ${result.Error}` : ''}`;
  switch (status) {
    case 'SUCCESS':
      return { kind: 'delivered', messageId: result?.MessageId };
    case 'ACCOUNT_THROTTLED':
      return { kind: 'throttled', lastResult: 'ses-throttled' };
    case 'ACCOUNT_DAILY_QUOTA_EXCEEDED':
      return { kind: 'quota-used-up', reason: `SES's daily sending quota is used up (${reason})` };
    case 'ACCOUNT_SUSPENDED':
    case 'ACCOUNT_SENDING_PAUSED':
    case 'CONFIGURATION_SET_SENDING_PAUSED':
      return { kind: 'held', reason: `SES holds every send: ${reason}` };
    case 'TRANSIENT_FAILURE':
    case undefined:
      return { kind: 'transient', lastResult: 'ses-transient', reason };
    default:
      return { kind: 'rejected', lastResult: `ses-${status.toLowerCase().replaceAll('_', '-')}`, reason };
  }
}

/** What the broker reads of the SES account (`GetAccount`): its rate and whether it may send. */
export interface SesAccountReading {
  /** Recipients per second. */
  readonly maxSendRate: number;
  readonly max24HourSend: number;
  readonly sentLast24Hours: number;
  readonly sendingEnabled: boolean;
}

export async function readSesAccount(ses: SESv2Client): Promise<SesAccountReading> {
  const out = await ses.send(new GetAccountCommand({}));
  return {
    maxSendRate: out.SendQuota?.MaxSendRate ?? 1,
    max24HourSend: out.SendQuota?.Max24HourSend ?? 200,
    sentLast24Hours: out.SendQuota?.SentLast24Hours ?? 0,
    sendingEnabled: out.SendingEnabled !== false,
  };
}
