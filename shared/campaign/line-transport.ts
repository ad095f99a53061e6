/**
 * LINE's adapter of the message seam (`transport.ts`): a job's LINE messages rendered per unit into
 * a push (one recipient) or a multicast (up to 500, when the messages have no placeholder), sent
 * through the channel's {@link SendPort} under LINE's retry key (`X-Line-Retry-Key`: a resend within
 * 24 hours cannot deliver twice, a 409 says the first was accepted), and LINE's answers read as the
 * pipeline's: 2xx delivered, 409 already delivered, other 4xx rejected, the monthly-limit 429 the
 * quota used up, any other 429 the rate, 5xx / timeout / dropped answers in doubt.
 */
import {
  type OutgoingMessage,
  type PreparedSend,
  prepareMulticast,
  preparePush,
  type SendOutcome,
} from '#shared/line/messaging-client.ts';
import { LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import type { SendPort } from './ports.ts';
import type { SendUnit } from './send-queue.ts';
import { compileTemplate, type MessageTemplate, MissingVariableError } from './template.ts';
import {
  type MessageTransport,
  type PreparedRequest,
  type TransportOutcome,
  UnpreparableError,
} from './transport.ts';

/** LINE's most recipients of one multicast. */
export const MAX_MULTICAST_RECIPIENTS = 500;

/** What LINE's validation endpoint is asked about a unit: the same endpoint and messages. */
export interface LineCheckable {
  readonly endpoint: 'push' | 'multicast';
  readonly messages: readonly OutgoingMessage[];
}

export interface LineTransportOptions {
  /** Push requests per second (LINE: 2,000 a channel). */
  readonly pushPerSecond?: number;
  /** Multicast requests per second (LINE: 200 a channel). */
  readonly multicastPerSecond?: number;
}

export class LineTransport implements MessageTransport<MessageTemplate, PreparedSend> {
  readonly channel = 'line';
  readonly idempotent = true;
  readonly acceptedAs = 'delivered';
  readonly limits;
  readonly #send: SendPort;

  constructor(send: SendPort, options: LineTransportOptions = {}) {
    this.#send = send;
    this.limits = {
      recipientsPerRequest: MAX_MULTICAST_RECIPIENTS,
      lanes: {
        push: options.pushPerSecond ?? LINE_RATE_LIMITS.push,
        multicast: options.multicastPerSecond ?? LINE_RATE_LIMITS.multicast,
      },
      countsRecipients: false,
    } as const;
  }

  /** Messages without a placeholder are the same for everyone: grouped by their content. */
  groupOf(template: MessageTemplate): string | undefined {
    let compiled: ReturnType<typeof compileTemplate>;
    try {
      compiled = compileTemplate(template);
    } catch {
      return undefined; // sent alone, where the error becomes the task's reason
    }
    if (compiled.variables.length > 0) return undefined;
    return JSON.stringify([template.messages, template.notificationDisabled ?? null]);
  }

  prepare(unit: SendUnit<MessageTemplate>): PreparedRequest<PreparedSend> & { checkable: LineCheckable } {
    const first = unit.tasks[0]!;
    let messages: readonly OutgoingMessage[];
    try {
      messages = compileTemplate(first.template).render(first.variables);
    } catch (error) {
      throw new UnpreparableError(
        error instanceof MissingVariableError
          ? `missing-variable: ${error.variable}`
          : `bad-message: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const opts =
      first.template.notificationDisabled === undefined
        ? {}
        : { notificationDisabled: first.template.notificationDisabled };
    try {
      const request =
        unit.endpoint === 'push'
          ? preparePush(first.recipient, messages, unit.retryKey, opts)
          : prepareMulticast(
              unit.tasks.map((t) => t.recipient),
              messages,
              unit.retryKey,
              opts,
            );
      return { lane: request.endpoint, request, checkable: { endpoint: unit.endpoint, messages } };
    } catch (error) {
      throw new UnpreparableError(`bad-message: ${(error as Error).message}`, { cause: error });
    }
  }

  async send(prepared: PreparedRequest<PreparedSend>): Promise<TransportOutcome> {
    return lineOutcome(await this.#send(prepared.request));
  }
}

/** LINE's answer as the pipeline reads it. */
export function lineOutcome(outcome: SendOutcome): TransportOutcome {
  switch (outcome.kind) {
    case 'delivered':
      return { kind: 'delivered', requestId: outcome.requestId };
    case 'rate-limited':
      return outcome.reason === 'monthly-quota'
        ? { kind: 'quota-used-up', quota: 'monthly', message: outcome.message, requestId: outcome.requestId }
        : {
            kind: 'rate-limited',
            retryAfterMs: outcome.retryAfterMs,
            message: outcome.message,
            requestId: outcome.requestId,
          };
    case 'rejected':
      return refusesRecipient(outcome) ? { ...outcome, recipientRefused: true } : outcome;
    default:
      return outcome;
  }
}

/**
 * LINE's 400 naming the request's `to` ("The property, 'to', in the request body is invalid"): the
 * user id reaches nobody on this channel (line/line-bot-sdk-java#54, line/line-bot-sdk-python#729).
 * Only a push has one recipient: a multicast's refusal is not one user's.
 */
function refusesRecipient(outcome: Extract<SendOutcome, { kind: 'rejected' }>): boolean {
  if (outcome.status !== 400) return false;
  return /property, 'to'/.test(outcome.message) || outcome.details.some((d) => d.property === 'to');
}
