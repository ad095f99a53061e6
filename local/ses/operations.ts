/**
 * The SES v2 operations the stand-in serves, each checking what SES checks, in this order:
 *
 * 1. the request itself (`BadRequestException`: see `compose.ts`; no recipient at all);
 * 2. the account: suspended → `AccountSuspendedException`, sending paused → `SendingPausedException`;
 * 3. the configuration set, when named, exists → else `NotFoundException`;
 * 4. the From address is a verified identity (the address, its domain or a parent domain) → else
 *    `MessageRejected` "Email address is not verified. The following identities failed the check in
 *    region US-EAST-1: …" (SES's wording, AWS Knowledge Center "ses-554-400-message-rejected-error");
 *    in the sandbox, every recipient too, mailbox-simulator addresses excepted;
 * 5. the size, at most 40 MB as sent (quotas page: "Using the SES v2 API … 40 MB per message (after
 *    base64 encoding)") → else `MessageRejected` (SES's exact wording for it was not found);
 * 6. the daily quota → `LimitExceededException` "Daily message quota exceeded.";
 * 7. the sending rate → 429 `TooManyRequestsException` "Maximum sending rate exceeded." (the v2
 *    API's throttle; the messages are the quota-errors page's,
 *    https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html).
 *
 * `SendBulkEmail` applies 1–4 to the call as a whole (a refusal refuses every entry) and 4's sandbox
 * check, 5, 6 and 7 to each entry in order, which gets `MESSAGE_REJECTED`,
 * `ACCOUNT_DAILY_QUOTA_EXCEEDED` or `ACCOUNT_THROTTLED` in the 200's `BulkEmailEntryResults` while
 * the entries that fit are `SUCCESS` (API_BulkEmailEntryResult). When the rate lets no entry through
 * at all, the call is refused as a whole with 429 `TooManyRequestsException`, which the API lists for
 * `SendBulkEmail` too: the throttle then applies before any entry is looked at, as it does for
 * `SendEmail`.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '#shared/pacing/clock.ts';
import type { SesAccount } from './account.ts';
import {
  type ComposedEmail,
  composeBulkEmail,
  composeSendEmail,
  type EmailTemplates,
  type SentEmail,
} from './compose.ts';
import { type SesEventPublisher, type SesEventType, simulatorScenario } from './events.ts';
import type { SesOutbox } from './outbox.ts';
import { type JsonFields, sesError } from './wire.ts';

/** Who called, as the signature and the connection tell. */
export interface Caller {
  readonly accessKeyId: string;
  readonly sourceIp: string;
}

export interface OperationsParts {
  readonly account: SesAccount;
  readonly templates: EmailTemplates;
  readonly publisher: SesEventPublisher;
  readonly clock: Clock;
  readonly region: string;
  readonly accountId: string;
  /** Configuration sets that exist, each with the event types its EventBridge destination matches. */
  readonly configurationSets: ReadonlyMap<string, ReadonlySet<SesEventType>>;
  readonly maxMessageBytes: number;
  /** Where each accepted email is also written for a developer to read, if anywhere. */
  readonly outbox?: SesOutbox;
}

interface BulkEntryResult {
  Status: string;
  MessageId?: string;
  Error?: string;
}

const recipientsOf = (email: ComposedEmail) => [...email.to, ...email.cc, ...email.bcc];

export class SesOperations {
  readonly #parts: OperationsParts;
  readonly #sent: SentEmail[] = [];

  constructor(parts: OperationsParts) {
    this.#parts = parts;
  }

  sent(): readonly SentEmail[] {
    return [...this.#sent];
  }

  /** `POST /v2/email/outbound-emails`. */
  sendEmail(input: JsonFields, caller: Caller): { MessageId: string } {
    const email = composeSendEmail(input, this.#parts.templates);
    const recipients = recipientsOf(email);
    if (recipients.length === 0) {
      throw sesError('BadRequestException', 'Missing required parameter Destination: no recipient');
    }
    this.#mayAccountSend();
    const configurationSet = this.#configurationSet(input);
    const identity = this.#fromIdentity(email);
    const refused = this.#entryRefusal(email);
    if (refused) throw sesError('MessageRejected', refused.Error!);
    const { account } = this.#parts;
    const counted = quotaCounted(recipients);
    if (!account.quotaAllows(counted))
      throw sesError('LimitExceededException', 'Daily message quota exceeded.');
    if (!account.takeRate(recipients.length)) {
      throw sesError('TooManyRequestsException', 'Maximum sending rate exceeded.');
    }
    account.recordSend(counted);
    return { MessageId: this.#accept(email, 'SendEmail', configurationSet, identity, caller) };
  }

  /** `POST /v2/email/outbound-bulk-emails`. */
  sendBulkEmail(input: JsonFields, caller: Caller): { BulkEmailEntryResults: BulkEntryResult[] } {
    const emails = composeBulkEmail(input, this.#parts.templates);
    this.#mayAccountSend();
    const configurationSet = this.#configurationSet(input);
    const identity = this.#fromIdentity(emails[0]!);
    const { account } = this.#parts;
    const planned = emails.map((email): BulkEntryResult | ComposedEmail => {
      const recipients = recipientsOf(email);
      if (recipients.length === 0)
        return { Status: 'INVALID_PARAMETER', Error: 'The destination has no recipient' };
      const refused = this.#entryRefusal(email);
      if (refused) return refused;
      const counted = quotaCounted(recipients);
      if (!account.quotaAllows(counted)) {
        return { Status: 'ACCOUNT_DAILY_QUOTA_EXCEEDED', Error: 'Daily message quota exceeded.' };
      }
      if (!account.takeRate(recipients.length)) {
        return { Status: 'ACCOUNT_THROTTLED', Error: 'Maximum sending rate exceeded.' };
      }
      account.recordSend(counted);
      return email;
    });
    if (planned.every((entry) => 'Status' in entry && entry.Status === 'ACCOUNT_THROTTLED')) {
      throw sesError('TooManyRequestsException', 'Maximum sending rate exceeded.');
    }
    return {
      BulkEmailEntryResults: planned.map((entry) =>
        'Status' in entry
          ? entry
          : {
              Status: 'SUCCESS',
              MessageId: this.#accept(entry, 'SendBulkEmail', configurationSet, identity, caller),
            },
      ),
    };
  }

  /** `GET /v2/email/account`. */
  getAccount(): Record<string, unknown> {
    const account = this.#parts.account.snapshot();
    return {
      DedicatedIpAutoWarmupEnabled: false,
      EnforcementStatus: account.suspended ? 'SHUTDOWN' : 'HEALTHY',
      ProductionAccessEnabled: !account.sandbox,
      SendQuota: {
        Max24HourSend: account.max24HourSend,
        MaxSendRate: account.maxSendRate,
        SentLast24Hours: account.sentLast24Hours,
      },
      SendingEnabled: account.sendingEnabled,
      SuppressionAttributes: { SuppressedReasons: ['BOUNCE', 'COMPLAINT'] },
    };
  }

  /** `POST /v2/email/templates`. */
  createEmailTemplate(input: JsonFields): Record<string, never> {
    const content = input.object('TemplateContent');
    this.#parts.templates.create(input.string('TemplateName'), {
      subject: content.optionalString('Subject'),
      text: content.optionalString('Text'),
      html: content.optionalString('Html'),
    });
    return {};
  }

  /** `GET /v2/email/templates/{TemplateName}`. */
  getEmailTemplate(name: string): Record<string, unknown> {
    const content = this.#parts.templates.get(name);
    return {
      TemplateName: name,
      TemplateContent: { Subject: content.subject, Text: content.text, Html: content.html },
    };
  }

  /** `DELETE /v2/email/templates/{TemplateName}`. */
  deleteEmailTemplate(name: string): Record<string, never> {
    this.#parts.templates.delete(name);
    return {};
  }

  #mayAccountSend(): void {
    const { suspended, sendingEnabled } = this.#parts.account.settings;
    if (suspended) {
      throw sesError(
        'AccountSuspendedException',
        "The message can't be sent because the account's ability to send email has been permanently restricted.",
      );
    }
    if (!sendingEnabled) {
      throw sesError(
        'SendingPausedException',
        "The message can't be sent because the account's ability to send email is currently paused.",
      );
    }
  }

  #configurationSet(input: JsonFields): string | undefined {
    const name = input.optionalString('ConfigurationSetName');
    if (name !== undefined && !this.#parts.configurationSets.has(name)) {
      throw sesError('NotFoundException', `Configuration set ${name} does not exist.`);
    }
    return name;
  }

  #notVerified(identities: readonly string[]): string {
    return `Email address is not verified. The following identities failed the check in region ${this.#parts.region.toUpperCase()}: ${identities.join(', ')}`;
  }

  /** The verified identity the From address sends as. */
  #fromIdentity(email: ComposedEmail): string {
    const identity = this.#parts.account.identityOf(email.fromAddress);
    if (!identity) throw sesError('MessageRejected', this.#notVerified([email.fromAddress]));
    return identity;
  }

  /** Why one email (or bulk entry) is rejected: unverified recipients in the sandbox, its size. */
  #entryRefusal(email: ComposedEmail): BulkEntryResult | undefined {
    const { account, maxMessageBytes } = this.#parts;
    if (account.settings.sandbox) {
      const unverified = recipientsOf(email).filter(
        (address) => simulatorScenario(address) === undefined && !account.identityOf(address),
      );
      if (unverified.length > 0) return { Status: 'MESSAGE_REJECTED', Error: this.#notVerified(unverified) };
    }
    if (email.size > maxMessageBytes) {
      return {
        Status: 'MESSAGE_REJECTED',
        Error: `Message length is more than ${maxMessageBytes} bytes long: ${email.size}.`,
      };
    }
    return undefined;
  }

  #accept(
    email: ComposedEmail,
    operation: SentEmail['operation'],
    configurationSet: string | undefined,
    identity: string,
    caller: Caller,
  ): string {
    const { clock, region, accountId, configurationSets, publisher } = this.#parts;
    const at = clock.now();
    const messageId = `0100${at.toString(16).padStart(12, '0')}-${randomUUID()}-000000`;
    const sent: SentEmail = {
      ...email,
      messageId,
      at,
      operation,
      ...(configurationSet === undefined ? {} : { configurationSet }),
    };
    this.#sent.push(sent);
    this.#parts.outbox?.write(sent);
    if (configurationSet !== undefined) {
      publisher.publish(sent, configurationSets.get(configurationSet)!, {
        sourceArn: `arn:aws:ses:${region}:${accountId}:identity/${identity}`,
        sourceIp: caller.sourceIp,
        callerIdentity: caller.accessKeyId,
      });
    }
    return messageId;
  }
}

/** Recipients the daily quota counts: the mailbox simulator's do not. */
function quotaCounted(recipients: readonly string[]): number {
  return recipients.filter((address) => simulatorScenario(address) === undefined).length;
}
