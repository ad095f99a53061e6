/**
 * An Amazon Connect emulator: the REST-JSON protocol `@aws-sdk/client-connect` speaks (reached by
 * `AWS_ENDPOINT_URL_CONNECT`), SigV4-checked like AWS, in front of the shared far side. It serves
 * the three operations Switchboard uses — `StartOutboundVoiceContact` (`PUT /contact/outbound-voice`,
 * `ClientToken` kept 7 days: a repeat returns the same contact), `DescribeContact`
 * (`GET /contacts/{InstanceId}/{ContactId}`), `StopContact` (`POST /contact/stop`) and
 * `GetContactAttributes` (`GET /contact/attributes/{InstanceId}/{InitialContactId}`: the start's
 * `Attributes`, plus, once a person answered, what the scripted call's contact flow set —
 * `ScriptedCall.contactAttributes`) — and sends
 * each contact's events (INITIATED, CONNECTED_TO_SYSTEM, DISCONNECTED) in EventBridge's envelope
 * to `deliver`, the handler the EventBridge rule targets in AWS. The far side's faults apply:
 * throttling (`LimitExceededException`, 429), 500s before and after a contact is created, slow
 * answers, lost, late, duplicated and reordered events, answering machines.
 *
 * Not reproduced: contact flows (an answered call "talks" for the far side's duration), queues,
 * agents, the instance's real quotas, and events other than those three.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CONNECT_ATTRIBUTES } from '#shared/adapters/connect-telephony.ts';
import { LOCAL_CONNECT_INSTANCE_ID } from '#shared/telephony/settings.ts';
import { LOCAL_ACCOUNT } from './api-gateway.ts';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './cloud.ts';
import { SigV4Error, verifySigV4 } from './sigv4.ts';
import {
  FarSide,
  type FarSideCall,
  type FarSideEvent,
  type FarSideOptions,
  type TelephonyEmulator,
} from './telephony-sandbox/far-side.ts';
import { answer, canonical, FrontError, readBody, serveFront } from './telephony-sandbox/http-front.ts';

/** The instance and flow the local stack's Connect clients use. */
export const LOCAL_CONNECT = {
  instanceId: LOCAL_CONNECT_INSTANCE_ID,
  contactFlowId: '00000000-0000-4000-8000-00000000f10e',
  sourcePhoneNumber: '+815000000000',
} as const;

/** An EventBridge event as a rule's target receives it. */
export interface EventBridgeEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: readonly string[];
  readonly detail: Record<string, unknown>;
}

export interface ConnectEmulatorOptions extends FarSideOptions {
  /** The rule's target: resolves when the event was handled (a rejection is retried, as Lambda's async invoke does). */
  readonly deliver: (event: EventBridgeEvent) => Promise<void>;
  /** Instances that exist, with their contact flows (default: {@link LOCAL_CONNECT}'s). */
  readonly instances?: Readonly<Record<string, readonly string[]>>;
  readonly region?: string;
  readonly port?: number;
}

/** A token is kept 7 days (`ClientToken`). */
const CLIENT_TOKEN_MS = 7 * 24 * 3600 * 1000;
/** Connect ends an unanswered outbound call after 60 s unless the start says otherwise. */
const DEFAULT_RING_TIMEOUT_SECONDS = 60;
/** Connect has no call length limit of its own; the contact flow ends the call. */
const MAX_TALK_SECONDS = 4 * 3600;
const E164 = /^\+[1-9]\d{1,14}$/;

interface ContactFacts {
  readonly instanceId: string;
  readonly amd: boolean;
  readonly attributes: Readonly<Record<string, string>>;
  /** What the contact flow sets once a person answers (the scripted call's, at the start). */
  readonly flowAttributes: Readonly<Record<string, string>>;
  readonly tokenUntil: number;
}

function awsError(status: number, type: string, message: string): FrontError {
  return new FrontError(status, { message }, { 'x-amzn-errortype': type });
}

/**
 * How Connect refuses a request whose signature does not pass: an access key it does not know is
 * `UnrecognizedClientException` ("The security token included in the request is invalid."), a
 * signature that does not match `InvalidSignatureException`, the rest `AccessDeniedException`.
 */
function signingRefusal(error: SigV4Error): FrontError {
  if (error.code === 'InvalidAccessKeyId')
    return awsError(
      403,
      'UnrecognizedClientException',
      'The security token included in the request is invalid.',
    );
  return awsError(
    403,
    error.code === 'SignatureDoesNotMatch' ? 'InvalidSignatureException' : 'AccessDeniedException',
    error.message,
  );
}

export async function startConnectEmulator(options: ConnectEmulatorOptions): Promise<TelephonyEmulator> {
  const front = new ConnectFront(options);
  const served = await serveFront(
    (req, res) => front.handle(req, res),
    { message: 'internal error' },
    options.port,
  );
  return front.far.emulatorView(served.url, () => served.close());
}

/** The Connect API's four operations and the contact events, over the far side. */
class ConnectFront {
  readonly far: FarSide;
  readonly #options: ConnectEmulatorOptions;
  readonly #region: string;
  readonly #instances: Readonly<Record<string, readonly string[]>>;
  readonly #facts = new Map<string, ContactFacts>();

  constructor(options: ConnectEmulatorOptions) {
    this.#options = options;
    this.far = new FarSide(options, () => randomUUID());
    this.#region = options.region ?? LOCAL_REGION;
    this.#instances = options.instances ?? { [LOCAL_CONNECT.instanceId]: [LOCAL_CONNECT.contactFlowId] };
  }

  #instanceArn(id: string): string {
    return `arn:aws:connect:${this.#region}:${LOCAL_ACCOUNT}:instance/${id}`;
  }

  #envelope(event: FarSideEvent, call: FarSideCall, contact: ContactFacts): EventBridgeEvent {
    const arn = this.#instanceArn(contact.instanceId);
    return {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Amazon Connect Contact Event',
      source: 'aws.connect',
      account: LOCAL_ACCOUNT,
      time: new Date(this.far.time.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      region: this.#region,
      resources: [`${arn}/contact/${call.callId}`, arn],
      detail: {
        eventType: eventTypeOf(event.status),
        ...contactDetail(event.status, event.at, event.reason, call, contact),
        instanceArn: arn,
      },
    };
  }

  /** Each event goes, in its envelope, to the rule's target; a rejection is retried by the far side. */
  #tell(contact: ContactFacts) {
    return (event: FarSideEvent, call: FarSideCall) => {
      const body = this.#envelope(event, call, contact);
      return async (signal: AbortSignal) => {
        if (signal.aborted) return false;
        await this.#options.deliver(structuredClone(body) as EventBridgeEvent);
        return true;
      };
    };
  }

  #start(body: string, res: ServerResponse): void {
    const input = parseJson(body);
    const instanceId = text(input, 'InstanceId');
    const flows = this.#instances[instanceId];
    if (!flows) throw awsError(404, 'ResourceNotFoundException', `Instance ${instanceId} not found`);
    const flowId = text(input, 'ContactFlowId');
    if (!flows.includes(flowId))
      throw awsError(404, 'ResourceNotFoundException', `Contact flow ${flowId} not found`);
    const to = text(input, 'DestinationPhoneNumber');
    if (!E164.test(to))
      throw awsError(400, 'InvalidParameterException', 'DestinationPhoneNumber must be E.164');
    if (input.SourcePhoneNumber === undefined && input.QueueId === undefined) {
      throw awsError(400, 'InvalidRequestException', 'SourcePhoneNumber or QueueId is required');
    }
    const ring = input.RingTimeoutInSeconds;
    if (ring !== undefined && (typeof ring !== 'number' || ring < 15 || ring > 60)) {
      throw awsError(400, 'InvalidParameterException', 'RingTimeoutInSeconds must be 15 to 60');
    }
    const key = text(input, 'ClientToken');
    const attributes = (input.Attributes ?? {}) as Record<string, string>;
    const fault = this.far.startFault(key);
    if (fault === 'throttled')
      throw awsError(429, 'LimitExceededException', 'injected: concurrent calls quota');
    if (fault === 'unavailable') throw awsError(500, 'InternalServiceException', 'injected: try again');
    const known = this.far.byKey(key);
    const now = this.far.time.now();
    if (known && (this.#facts.get(known.callId)?.tokenUntil ?? 0) > now) {
      answer(res, 200, { ContactId: known.callId });
      return;
    }
    const amd =
      (input.AnswerMachineDetectionConfig as { EnableAnswerMachineDetection?: boolean } | undefined)
        ?.EnableAnswerMachineDetection === true;
    const contact: ContactFacts = {
      instanceId,
      amd,
      attributes,
      flowAttributes: this.far.override(to)?.contactAttributes ?? {},
      tokenUntil: now + CLIENT_TOKEN_MS,
    };
    const call = this.far.place({
      key,
      fingerprint: canonical(input),
      clientId: attributes[CONNECT_ATTRIBUTES.client] ?? 'unknown',
      to,
      taskId: attributes[CONNECT_ATTRIBUTES.task] ?? key,
      attempt: Number(attributes[CONNECT_ATTRIBUTES.attempt] ?? 1),
      maxDurationSeconds: MAX_TALK_SECONDS,
      ringTimeoutSeconds: typeof ring === 'number' ? ring : DEFAULT_RING_TIMEOUT_SECONDS,
      tell: this.#tell(contact),
    });
    this.#facts.set(call.callId, contact);
    if (fault.failAfterCreate)
      throw awsError(500, 'InternalServiceException', 'injected after the contact started');
    const placed = { ContactId: call.callId };
    if (this.far.faults.initiateDelayMs > 0)
      this.far.holdAnswer(res, this.far.faults.initiateDelayMs, () => answer(res, 200, placed));
    else answer(res, 200, placed);
  }

  #describe(res: ServerResponse, instanceId: string, contactId: string): void {
    const call = this.far.call(contactId);
    const contact = this.#facts.get(contactId);
    if (!call || !contact || contact.instanceId !== instanceId) {
      throw awsError(404, 'ResourceNotFoundException', `Contact ${contactId} not found`);
    }
    const now = call.snapshot;
    const d = contactDetail(now.status, now.at, now.reason, call, contact) as Record<string, unknown>;
    const seconds = (iso: unknown) => (typeof iso === 'string' ? Date.parse(iso) / 1000 : undefined);
    answer(res, 200, {
      Contact: {
        Arn: `${this.#instanceArn(instanceId)}/contact/${contactId}`,
        Id: contactId,
        Channel: 'VOICE',
        InitiationMethod: 'API',
        InitiationTimestamp: seconds(d.initiationTimestamp),
        ...(d.connectedToSystemTimestamp
          ? { ConnectedToSystemTimestamp: seconds(d.connectedToSystemTimestamp) }
          : {}),
        ...(d.disconnectTimestamp ? { DisconnectTimestamp: seconds(d.disconnectTimestamp) } : {}),
        ...(d.disconnectReason ? { DisconnectReason: d.disconnectReason } : {}),
        ...(d.answeringMachineDetectionStatus
          ? { AnsweringMachineDetectionStatus: d.answeringMachineDetectionStatus }
          : {}),
        Attributes: contact.attributes,
      },
    });
  }

  /** The contact's user-defined attributes: the start's, and the flow's once a person answered. */
  #attributes(res: ServerResponse, instanceId: string, contactId: string): void {
    if (!this.#instances[instanceId]) {
      throw awsError(404, 'ResourceNotFoundException', `Instance ${instanceId} not found`);
    }
    const call = this.far.call(contactId);
    const contact = this.#facts.get(contactId);
    if (!call || !contact || contact.instanceId !== instanceId) {
      throw awsError(404, 'ResourceNotFoundException', `Contact ${contactId} not found`);
    }
    const flowRan = call.answeredAt !== undefined && !call.machine;
    answer(res, 200, { Attributes: { ...contact.attributes, ...(flowRan ? contact.flowAttributes : {}) } });
  }

  #stop(body: string, res: ServerResponse): void {
    const input = parseJson(body);
    const contactId = text(input, 'ContactId');
    const contact = this.#facts.get(contactId);
    if (!contact || contact.instanceId !== text(input, 'InstanceId')) {
      throw awsError(410, 'ContactNotFoundException', `Contact ${contactId} not found`);
    }
    if (!this.far.hangUp(contactId, 'stopped')) {
      throw awsError(410, 'ContactNotFoundException', `Contact ${contactId} has ended`);
    }
    answer(res, 200, {});
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readRaw(req);
    try {
      verifySigV4(
        { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
        {
          secrets: { [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey },
          region: this.#region,
          service: 'connect',
          body,
          allowQuery: false,
        },
      );
    } catch (error) {
      if (!(error instanceof SigV4Error)) throw error;
      throw signingRefusal(error);
    }
    const text = body.toString('utf8');
    const path = new URL(req.url ?? '/', 'http://connect').pathname;
    if (req.method === 'PUT' && path === '/contact/outbound-voice') return this.#start(text, res);
    if (req.method === 'POST' && path === '/contact/stop') return this.#stop(text, res);
    const attributesMatch = /^\/contact\/attributes\/([^/]+)\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && attributesMatch) {
      return this.#attributes(
        res,
        decodeURIComponent(attributesMatch[1]!),
        decodeURIComponent(attributesMatch[2]!),
      );
    }
    const describeMatch = /^\/contacts\/([^/]+)\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && describeMatch) {
      return this.#describe(
        res,
        decodeURIComponent(describeMatch[1]!),
        decodeURIComponent(describeMatch[2]!),
      );
    }
    throw awsError(404, 'UnknownOperationException', `no operation ${req.method} ${path}`);
  }
}

/** The body, read once: the signature covers it, the operation parses it. */
async function readRaw(req: IncomingMessage): Promise<Buffer> {
  return Buffer.from(await readBody(req, { message: 'request too large' }), 'utf8');
}

/**
 * The contact as Connect describes it once it reached `status` (an event's, or the call's now):
 * connected once answered, disconnected with a reason (and the AMD status when enabled) once over.
 */
function contactDetail(
  status: string,
  at: string,
  reason: string | undefined,
  call: FarSideCall,
  contact: ContactFacts,
): Record<string, unknown> {
  const iso = (ms: number) => new Date(ms).toISOString();
  const over = !['queued', 'ringing', 'answered'].includes(status);
  const connected = call.answeredAt !== undefined && (status === 'answered' || over);
  return {
    contactId: call.callId,
    initialContactId: call.callId,
    channel: 'VOICE',
    initiationMethod: 'API',
    initiationTimestamp: iso(call.startedAt),
    ...(connected ? { connectedToSystemTimestamp: iso(call.answeredAt!) } : {}),
    ...(over
      ? {
          disconnectTimestamp: at,
          disconnectReason: disconnectReasonOf(status, reason),
          ...(contact.amd ? { answeringMachineDetectionStatus: amdOf(status, call.machine) } : {}),
        }
      : {}),
    tags: { 'aws:connect:instanceId': contact.instanceId },
  };
}

function parseJson(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw awsError(400, 'SerializationException', 'the body is not a JSON object');
}

function text(input: Record<string, unknown>, name: string): string {
  const value = input[name];
  if (typeof value !== 'string' || value === '')
    throw awsError(400, 'InvalidParameterException', `${name} is required`);
  return value;
}

function eventTypeOf(status: string): string {
  if (status === 'ringing') return 'INITIATED';
  if (status === 'answered') return 'CONNECTED_TO_SYSTEM';
  return 'DISCONNECTED';
}

function disconnectReasonOf(status: string, reason: string | undefined): string {
  switch (status) {
    case 'busy':
      return 'TELECOM_BUSY';
    case 'no-answer':
      return 'TELECOM_TIMEOUT';
    case 'failed':
      return reason === 'stopped' ? 'OTHER' : 'TELECOM_NUMBER_INVALID';
    default:
      return reason === 'stopped' ? 'OTHER' : 'CUSTOMER_DISCONNECT';
  }
}

function amdOf(status: string, machine: boolean): string {
  if (machine) return 'VOICEMAIL_BEEP';
  if (status === 'busy') return 'SIT_TONE_BUSY';
  if (status === 'no-answer') return 'AMD_UNANSWERED';
  if (status === 'failed') return 'SIT_TONE_INVALID_NUMBER';
  return 'HUMAN_ANSWERED';
}
