/**
 * AWS End User Messaging SMS's adapter of the message seam (`shared/campaign/transport.ts`), for
 * SMS jobs: one `SendTextMessage` a recipient (the API has no bulk send).
 *
 * - Each text is rendered here (`renderSms`) and costs its message parts (`shared/sms/parts.ts`: a
 *   Japanese text is UCS-2, 70 characters a part, 67 once split). The origination identity's rate is
 *   counted in parts per second (MPS), so the lane carries requests at that rate (a text is at least
 *   one part) and `ready` takes the text's parts from the identity's rate, shared by every client of
 *   the process that sends from it.
 * - Every text carries the `Context` keys `sb-client`, `sb-job`, `sb-task`, `sb-attempt`
 *   (`SMS_CONTEXT`): its delivery events carry them back, naming the task and the attempt.
 * - The service takes no idempotency key, so the transport is not idempotent: an unanswered text is
 *   not resent blindly (the pipeline waits for its event, then ends the task `in-doubt`, or sends it
 *   once more when the client chose at-least-once). The client must not retry either: make it with
 *   `maxAttempts: 1` ({@link SMS_CLIENT_CONFIG}).
 * - Answers: 200 with a `MessageId` → accepted (not delivered: the events say the rest);
 *   `ThrottlingException` → wait and retry; `ServiceQuotaExceededException` for the month's spend
 *   limit → the quota is used up (the job pauses and says so); `AccessDeniedException` (account
 *   disabled, reputation) and `ResourceNotFoundException` (the identity or configuration set is not
 *   there) → held, every SMS job of the client waits; `ConflictException`
 *   `DESTINATION_PHONE_NUMBER_OPTED_OUT` and a `ValidationException` about the destination → that
 *   recipient's task fails with the reason; 5xx, a timeout, a dropped connection → in doubt.
 *
 * Sources: End User Messaging SMS API reference, SendTextMessage and its errors
 * (https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SendTextMessage.html),
 * the exceptions' `Reason` values as the SDK's model lists them; the user guide's "SMS character
 * limits" and "MPS limits" (cited in `shared/sms/parts.ts`).
 */
import {
  type PinpointSMSVoiceV2Client,
  SendTextMessageCommand,
  type SendTextMessageCommandInput,
} from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { defaultBurst } from '#shared/campaign/send-pacer.ts';
import type { SendUnit } from '#shared/campaign/send-queue.ts';
import {
  type PreparedRequest,
  type TransportOutcome,
  UnpreparableError,
} from '#shared/campaign/transport.ts';
import { SMS_CONTEXT, type SmsSettings } from '#shared/sms/settings.ts';
import { MissingVariableError, renderSms, type SmsTemplate } from '#shared/sms/template.ts';
import type { SdkFailure, ServiceFailureRules } from './aws-send-failure.ts';
import { UnkeyedAwsTransport } from './unkeyed-aws-transport.ts';

/** The SMS client's settings the transport needs: no retry of its own (a retry may send twice). */
export const SMS_CLIENT_CONFIG = { maxAttempts: 1 } as const;

/** The most parts one text can cost: 1,600 UCS-2 characters, 67 a part once split. */
export const MAX_PARTS_PER_TEXT = Math.ceil(1_600 / 67);

/**
 * The burst of an origination identity's shared rate: a request's worth, the most a text costs, up
 * to a quarter of a second's (`defaultBurst`): a send a timer woke late must not lose its share of
 * the rate, and the service's own bucket holds a second's worth.
 */
export function smsRateBurst(partsPerSecond: number): number {
  return defaultBurst(partsPerSecond, MAX_PARTS_PER_TEXT) ?? 1;
}

/** The lane of every text: the origination identity's rate. */
export const SMS_LANE = 'sms';

export interface SmsTransportOptions {
  readonly sms: PinpointSMSVoiceV2Client;
  readonly clientId: string;
  readonly settings: SmsSettings;
  /**
   * The configuration set every text names: the stack's, whose event destination reaches sms-events
   * (the only one the brokers may send under, and the only source its topic takes).
   */
  readonly defaultConfigurationSet: string | undefined;
  /** The origination identity's message parts per second (MPS). */
  readonly partsPerSecond: number;
  /**
   * The identity's rate every client of the process sending from it takes parts from: each text
   * waits there for its parts before it goes. None: the lane alone paces (one part a text).
   */
  readonly sharedParts?: { take(parts: number): Promise<void> };
}

/** A text as it goes, and what it costs. */
export interface SmsRequest {
  readonly input: SendTextMessageCommandInput;
  readonly parts: number;
}

export class SmsTransport extends UnkeyedAwsTransport<SmsTemplate, SmsRequest> {
  readonly #options: SmsTransportOptions;

  constructor(options: SmsTransportOptions) {
    super({
      channel: 'sms',
      delivery: options.settings.delivery,
      limits: {
        recipientsPerRequest: 1,
        lanes: { [SMS_LANE]: options.partsPerSecond },
        countsRecipients: false,
      },
      failures: SMS_FAILURES,
    });
    this.#options = options;
  }

  /** Every text is its recipient's own: no request is shared. */
  groupOf(): undefined {
    return undefined;
  }

  prepare(unit: SendUnit<SmsTemplate>): PreparedRequest<SmsRequest> {
    const task = unit.tasks[0]!;
    let rendered: ReturnType<typeof renderSms>;
    try {
      rendered = renderSms(task.template, task.variables);
    } catch (error) {
      throw error instanceof MissingVariableError
        ? new UnpreparableError(`missing-variable: ${error.variable}`, { cause: error })
        : new UnpreparableError(`bad-sms: ${(error as Error).message}`, { cause: error });
    }
    const { settings, clientId, defaultConfigurationSet } = this.#options;
    const configurationSet = defaultConfigurationSet;
    const input: SendTextMessageCommandInput = {
      DestinationPhoneNumber: task.recipient,
      OriginationIdentity: settings.originationIdentity,
      MessageBody: rendered.body,
      MessageType: settings.messageType ?? 'TRANSACTIONAL',
      ...(configurationSet ? { ConfigurationSetName: configurationSet } : {}),
      Context: {
        [SMS_CONTEXT.client]: clientId,
        [SMS_CONTEXT.job]: task.jobId,
        [SMS_CONTEXT.task]: task.taskId,
        [SMS_CONTEXT.attempt]: String(task.attempt),
      },
    };
    return { lane: SMS_LANE, request: { input, parts: rendered.parts.parts } };
  }

  /** The text's parts taken from the origination identity's rate. */
  async ready(prepared: PreparedRequest<SmsRequest>): Promise<void> {
    await this.#options.sharedParts?.take(prepared.request.parts);
  }

  protected async request(request: SmsRequest): Promise<TransportOutcome> {
    const out = await this.#options.sms.send(new SendTextMessageCommand(request.input));
    return { kind: 'delivered', requestId: out.MessageId };
  }
}

/** Refusals about the destination: that recipient's task fails, the job goes on. */
const DESTINATION_REASONS = new Set([
  'DESTINATION_PHONE_NUMBER_OPTED_OUT',
  'DESTINATION_COUNTRY_BLOCKED',
  'INVALID_IDENTITY_FOR_DESTINATION_COUNTRY',
  'COUNTRY_NOT_ENABLED',
  'COUNTRY_CODE_MISMATCH',
  'INTERNATIONAL_SENDING_NOT_SUPPORTED',
  'PRICE_OVER_THRESHOLD',
]);

/** What End User Messaging SMS's own exceptions mean (SendTextMessage's errors and their `Reason`). */
export const SMS_FAILURES: ServiceFailureRules = {
  rateLimited: 'ThrottlingException',
  quotaUsedUp: {
    name: 'ServiceQuotaExceededException',
    quota: 'monthly',
    what: "the account's monthly SMS spend limit",
    applies: (f) => f.reasonCode?.startsWith('MONTHLY_SPEND_LIMIT') === true,
  },
  held: {
    names: ['AccessDeniedException', 'ResourceNotFoundException'],
    what: 'End User Messaging SMS sends nothing for this client',
  },
  other: (f) =>
    f.reasonCode !== undefined && DESTINATION_REASONS.has(f.reasonCode) ? refusedRecipient(f) : undefined,
};

/** The one recipient refused, with the service's reason as its result (`sms-destination-phone-number-opted-out`). */
function refusedRecipient(f: SdkFailure): TransportOutcome {
  const code = f.reasonCode!;
  const reason =
    code === 'DESTINATION_PHONE_NUMBER_OPTED_OUT'
      ? `the number opted out of texts from this origination identity (STOP): ${f.message}`
      : `${code}: ${f.message}`;
  return {
    kind: 'per-recipient',
    requestId: f.requestId,
    // The number cannot be texted from here at all: a job that falls back tries its next channel
    // (after a STOP only when the client keeps a STOP to SMS: `suppressionScope`).
    entries: [
      {
        kind: 'rejected',
        lastResult: `sms-${code.toLowerCase().replaceAll('_', '-')}`,
        reason,
        unreachable: code === 'DESTINATION_PHONE_NUMBER_OPTED_OUT' ? 'opted-out' : true,
      },
    ],
  };
}
