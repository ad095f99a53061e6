/**
 * The telephony port over Amazon Connect (`@aws-sdk/client-connect`): a call is
 * `StartOutboundVoiceContact` with the attempt key as its `ClientToken` (Connect returns the same
 * contact for a repeated token, so a retry of an ambiguous start does not ring again), and a call's
 * state is `DescribeContact`. Call ends arrive as contact events on EventBridge
 * (`lambdas/connect-events`); this adapter's `getCall` is the reconciliation path when they do not.
 * Connect does not end a call at a length of its own (the contact flow does): a call still in
 * progress at its maximum duration is ended with `StopContact` (`hangUp`).
 *
 * The client is made with `maxAttempts: 1`: the broker retries, spaced at the line's rate, so
 * that a retried start never lands closer to the previous one than the client's calls per second.
 */
import {
  type ConnectClient,
  DescribeContactCommand,
  type DescribeContactCommandOutput,
  StartOutboundVoiceContactCommand,
  StopContactCommand,
} from '@aws-sdk/client-connect';
import {
  CONNECT_ATTRIBUTES,
  CONNECT_KEY_ATTRIBUTE,
  type ConnectContactState,
  connectCallSnapshot,
} from '#shared/telephony/connect-contact.ts';
import type {
  CallRequest,
  CallSnapshot,
  InitiateOutcome,
  TelephonyProvider,
} from '#shared/telephony/port.ts';
import { TelephonyRequestError, TelephonyUnavailableError } from '#shared/telephony/port.ts';
import type { ConnectSettings } from '#shared/telephony/settings.ts';

export { CONNECT_ATTRIBUTES };

/** How long a throttled start waits when Connect says nothing (it sends no Retry-After). */
const THROTTLE_WAIT_MS = 1_000;

/** Errors that mean "not now": throttling and the instance's concurrent-call quota. */
const THROTTLED = new Set(['ThrottlingException', 'LimitExceededException', 'TooManyRequestsException']);

/** The telephony port over one Amazon Connect instance (its settings), through `client`. */
export class ConnectTelephonyProvider implements TelephonyProvider {
  readonly linksCalls = true;
  readonly #client: ConnectClient;
  readonly #settings: ConnectSettings;

  constructor(client: ConnectClient, settings: ConnectSettings) {
    this.#client = client;
    this.#settings = settings;
  }

  async initiate(request: CallRequest, idempotencyKey: string): Promise<InitiateOutcome> {
    try {
      const answer = await this.#client.send(
        new StartOutboundVoiceContactCommand(startInput(request, idempotencyKey, this.#settings)),
      );
      if (!answer.ContactId) return { kind: 'retryable', reason: 'Connect answered without a ContactId' };
      return { kind: 'accepted', callId: answer.ContactId, duplicate: false };
    } catch (error) {
      return outcomeOfError(error);
    }
  }

  async hangUp(callId: string): Promise<boolean> {
    try {
      await this.#client.send(
        new StopContactCommand({ InstanceId: this.#settings.instanceId, ContactId: callId }),
      );
      return true;
    } catch (error) {
      if (isUnknownContact(error)) return false;
      throw asReadError(error);
    }
  }

  async getCall(callId: string): Promise<CallSnapshot | undefined> {
    let answer: DescribeContactCommandOutput;
    try {
      answer = await this.#client.send(
        new DescribeContactCommand({ InstanceId: this.#settings.instanceId, ContactId: callId }),
      );
    } catch (error) {
      if (isUnknownContact(error)) return undefined;
      throw asReadError(error);
    }
    const contact = answer.Contact;
    if (!contact?.Id) return undefined;
    const state: ConnectContactState = {
      contactId: contact.Id,
      ...epoch('initiatedAt', contact.InitiationTimestamp),
      ...epoch('connectedAt', contact.ConnectedToSystemTimestamp),
      ...epoch('disconnectedAt', contact.DisconnectTimestamp),
      ...(contact.DisconnectReason ? { disconnectReason: contact.DisconnectReason } : {}),
      ...(contact.AnsweringMachineDetectionStatus
        ? { amdStatus: contact.AnsweringMachineDetectionStatus }
        : {}),
    };
    return connectCallSnapshot(state, contact.Attributes?.[CONNECT_KEY_ATTRIBUTE] ?? '');
  }
}

function startInput(request: CallRequest, key: string, settings: ConnectSettings) {
  return {
    InstanceId: settings.instanceId,
    ContactFlowId: settings.contactFlowId,
    DestinationPhoneNumber: request.to,
    ClientToken: key,
    ...(settings.sourcePhoneNumber ? { SourcePhoneNumber: settings.sourcePhoneNumber } : {}),
    ...(settings.queueId ? { QueueId: settings.queueId } : {}),
    Attributes: {
      ...request.variables,
      [CONNECT_ATTRIBUTES.client]: request.clientId,
      [CONNECT_ATTRIBUTES.job]: request.jobId,
      [CONNECT_ATTRIBUTES.task]: request.taskId,
      [CONNECT_ATTRIBUTES.attempt]: String(request.attempt),
      [CONNECT_ATTRIBUTES.key]: key,
    },
    ...(settings.answeringMachineDetection
      ? {
          AnswerMachineDetectionConfig: {
            EnableAnswerMachineDetection: true,
            AwaitAnswerMachinePrompt: true,
          },
        }
      : {}),
    ...(request.ringTimeoutSeconds === undefined ? {} : { RingTimeoutInSeconds: request.ringTimeoutSeconds }),
  };
}

function epoch<K extends string>(name: K, value: Date | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [name]: value.getTime() } as Record<K, number>);
}

function errorFacts(error: unknown): { name: string; status: number | undefined; message: string } {
  const e = error as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  return {
    name: e?.name ?? 'Error',
    status: e?.$metadata?.httpStatusCode,
    message: e?.message ?? String(error),
  };
}

function isUnknownContact(error: unknown): boolean {
  const { name } = errorFacts(error);
  return name === 'ResourceNotFoundException' || name === 'ContactNotFoundException';
}

/** A describe or stop that failed: "not now" (5xx, throttled, no answer) or a final refusal. */
function asReadError(error: unknown): Error {
  const { name, status, message } = errorFacts(error);
  if (status === undefined || status >= 500 || THROTTLED.has(name)) {
    return new TelephonyUnavailableError(`Connect ${name}: ${message}`);
  }
  return new TelephonyRequestError(status, name, message);
}

/**
 * A start's error as the broker reads it: throttled → wait and retry (same token); a 5xx, a
 * timeout or a reset → ambiguous, retry (same token, Connect returns the contact if it exists);
 * any other 4xx (bad instance, flow or number, no permission) → final, the task fails with it.
 */
export function outcomeOfError(error: unknown): InitiateOutcome {
  const { name, status, message } = errorFacts(error);
  if (THROTTLED.has(name) || status === 429) return { kind: 'rate-limited', retryAfterMs: THROTTLE_WAIT_MS };
  if (status === undefined || status >= 500) return { kind: 'retryable', reason: `${name}: ${message}` };
  return { kind: 'rejected', status, code: name, message };
}
