/**
 * The telephony port over Twilio Programmable Voice, its REST API spoken over `fetch` (the
 * `twilio` package would add ~2 MB to the broker for four requests): a call is
 * `POST /2010-04-01/Accounts/{AccountSid}/Calls.json` (form-encoded, Basic auth with the client's
 * auth token), its state `GET …/Calls/{Sid}.json`, its end `POST …/Calls/{Sid}.json Status=completed`.
 * Status callbacks go to the status route with the attempt in the URL Twilio signs
 * (`shared/broker/twilio-status.ts`).
 *
 * Twilio has no idempotency key on call creation. A create whose answer was lost (timeout, 5xx,
 * reset) may or may not have placed the call, so before trying again the adapter looks for it:
 * the calls to the same number from the same caller id created since the attempt started, minus
 * the ones linked to another attempt. Found: that call is this attempt's. None: nothing was placed,
 * and the create is sent again. The argument, and what it does not cover, is in
 * `docs/telephony-provider.md` ("Twilio: no idempotency key").
 */
import type { CallLinkStore } from '#shared/broker/ports.ts';
import { callbackUrlFor } from '#shared/broker/settle.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { transportFailure } from '#shared/telephony/http-provider.ts';
import type {
  CallRequest,
  CallSnapshot,
  InitiateContext,
  InitiateOutcome,
  TelephonyProvider,
} from '#shared/telephony/port.ts';
import { TelephonyRequestError, TelephonyUnavailableError } from '#shared/telephony/port.ts';
import type { TwilioSettings } from '#shared/telephony/settings.ts';
import { parseTwilioTime, TWILIO_CALLBACK_EVENTS, twilioCallSnapshot } from '#shared/telephony/twilio.ts';

export interface TwilioTelephonyOptions {
  readonly settings: TwilioSettings;
  /** `https://api.twilio.com`, or the local emulator. */
  readonly apiUrl: string;
  /** The public URL of `POST /providers/twilio/calls/status` (the stack's API, or its custom domain). */
  readonly callbackUrl: string;
  readonly clientId: string;
  /** The client's auth token (its stored telephony secret); undefined when none is set. */
  readonly authToken: () => Promise<string | undefined>;
  /** Which attempt a call is linked to: a found call linked to another attempt is not ours. */
  readonly links?: Pick<CallLinkStore, 'find'>;
  readonly clock: Clock;
  /** Per-request deadline (default 10,000 ms). */
  readonly timeoutMs?: number;
  /** How long after an ambiguous create to wait before looking for the call (default {@link TWILIO_LOOKUP_SETTLE_MS}). */
  readonly lookupSettleMs?: number;
  readonly fetch?: typeof fetch;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_RETRY_AFTER_MS = 1_000;
/** Calls created this long before the attempt's start still count (clock skew, second resolution). */
const LOOKUP_MARGIN_MS = 120_000;
/**
 * After an ambiguous create the adapter waits this long before it looks: a create still on its
 * way through Twilio when we look would not be found, and the retry would ring twice.
 */
export const TWILIO_LOOKUP_SETTLE_MS = 10_000;
/** Calls of one number listed per lookup (Twilio lists newest first). */
const LOOKUP_PAGE_SIZE = 50;
/** Twilio's "call is not in progress" (an update of a call that has ended). */
const NOT_IN_PROGRESS = 21220;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown> | undefined;
}

export class TwilioTelephonyProvider implements TelephonyProvider {
  /** Calls are linked to their attempts, so a lookup can tell this attempt's call from another's. */
  readonly linksCalls = true;
  readonly #options: TwilioTelephonyOptions;
  readonly #calls: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  /** When this process last sent a create per attempt key, and it came back ambiguous. */
  readonly #ambiguousAt = new Map<string, number>();
  /** The `initiate` under way per attempt key: a second one for the key waits for it (never two creates). */
  readonly #underWay = new Map<string, Promise<InitiateOutcome>>();
  readonly #settleMs: number;

  constructor(options: TwilioTelephonyOptions) {
    this.#options = options;
    const base = options.apiUrl.replace(/\/+$/, '');
    this.#calls = `${base}/2010-04-01/Accounts/${encodeURIComponent(options.settings.accountSid)}/Calls`;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#settleMs = options.lookupSettleMs ?? TWILIO_LOOKUP_SETTLE_MS;
  }

  initiate(request: CallRequest, key: string, context?: InitiateContext): Promise<InitiateOutcome> {
    const running = this.#underWay.get(key);
    if (running) return running;
    const attempt = this.#initiate(request, key, context).finally(() => this.#underWay.delete(key));
    this.#underWay.set(key, attempt);
    return attempt;
  }

  async #initiate(request: CallRequest, key: string, context?: InitiateContext): Promise<InitiateOutcome> {
    const token = await this.#options.authToken();
    if (token === undefined) {
      return {
        kind: 'rejected',
        status: 401,
        code: 'twilio_no_auth_token',
        message: `no Twilio auth token is stored for client ${request.clientId}`,
      };
    }
    if (context?.maybePlaced || this.#ambiguousAt.has(key)) {
      const found = await this.#lookUp(request, key, token);
      if (found !== 'none') return found;
    }
    const answer = await this.#send(token, `${this.#calls}.json`, 'POST', this.#createForm(request));
    const outcome = this.#outcomeOfCreate(answer);
    if (outcome.kind === 'retryable') this.#ambiguousAt.set(key, this.#options.clock.now());
    else this.#ambiguousAt.delete(key);
    return outcome;
  }

  async getCall(callId: string): Promise<CallSnapshot | undefined> {
    const answer = await this.#read(`${this.#calls}/${encodeURIComponent(callId)}.json`, 'GET');
    if (answer.status === 404) return undefined;
    return twilioCallSnapshot(answer.body, '');
  }

  async hangUp(callId: string): Promise<boolean> {
    try {
      await this.#read(
        `${this.#calls}/${encodeURIComponent(callId)}.json`,
        'POST',
        new URLSearchParams({ Status: 'completed' }),
      );
      return true;
    } catch (error) {
      if (error instanceof TelephonyRequestError && error.code === `twilio_${NOT_IN_PROGRESS}`) return false;
      throw error;
    }
  }

  #createForm(request: CallRequest): URLSearchParams {
    const { settings, callbackUrl, clientId } = this.#options;
    const form = new URLSearchParams();
    form.set('To', request.to);
    form.set('From', request.from ?? settings.from);
    if (settings.applicationSid) form.set('ApplicationSid', settings.applicationSid);
    else form.set('Url', settings.voiceUrl!);
    const base = new URL(callbackUrl);
    base.searchParams.set('client', clientId);
    form.set('StatusCallback', callbackUrlFor(base.toString(), request));
    form.set('StatusCallbackMethod', 'POST');
    for (const event of TWILIO_CALLBACK_EVENTS) form.append('StatusCallbackEvent', event);
    if (request.ringTimeoutSeconds !== undefined) form.set('Timeout', String(request.ringTimeoutSeconds));
    form.set('TimeLimit', String(request.maxDurationSeconds));
    if (settings.machineDetection) form.set('MachineDetection', settings.machineDetection);
    return form;
  }

  #outcomeOfCreate(answer: Answer | string): InitiateOutcome {
    if (typeof answer === 'string') return { kind: 'retryable', reason: answer };
    const { status, body } = answer;
    if (status >= 200 && status < 300) {
      const sid = body?.sid;
      if (typeof sid !== 'string' || sid === '')
        return { kind: 'retryable', reason: `HTTP ${status} without a sid` };
      const queued = Number(body?.queue_time);
      return {
        kind: 'accepted',
        callId: sid,
        duplicate: false,
        ...(Number.isFinite(queued) && queued > 0 ? { queuedMs: queued } : {}),
      };
    }
    if (status === 429) return { kind: 'rate-limited', retryAfterMs: retryAfterMs(answer.headers) };
    const { code, message } = errorOf(answer);
    if (status >= 500 || status === 408) return { kind: 'retryable', reason: `HTTP ${status} ${code}` };
    return { kind: 'rejected', status, code, message };
  }

  /**
   * This attempt's call if Twilio has it, `none` when it has none, or `retryable` when it cannot
   * tell yet (too soon after the ambiguous create, or the list could not be read).
   */
  async #lookUp(request: CallRequest, key: string, token: string): Promise<InitiateOutcome | 'none'> {
    const { clock, links, settings } = this.#options;
    const ambiguousAt = this.#ambiguousAt.get(key);
    const settling = ambiguousAt === undefined ? 0 : ambiguousAt + this.#settleMs - clock.now();
    // Nothing is sent now: the broker waits, then asks again (and this time the lookup is made).
    if (settling > 0) return { kind: 'rate-limited', retryAfterMs: settling };
    const query = new URLSearchParams({
      To: request.to,
      From: request.from ?? settings.from,
      PageSize: String(LOOKUP_PAGE_SIZE),
    });
    const answer = await this.#send(token, `${this.#calls}.json?${query}`, 'GET');
    if (typeof answer === 'string' || answer.status !== 200) {
      const why = typeof answer === 'string' ? answer : `HTTP ${answer.status}`;
      return { kind: 'retryable', reason: `could not look for the call: ${why}` };
    }
    const since = (request.startedAt ?? clock.now()) - LOOKUP_MARGIN_MS;
    const calls = Array.isArray(answer.body?.calls) ? (answer.body.calls as Record<string, unknown>[]) : [];
    const candidates = calls
      .filter(
        (call) =>
          typeof call.sid === 'string' && (parseTwilioTime(call.date_created as string) ?? 0) >= since,
      )
      .reverse(); // oldest first: the first create of this attempt is the one to keep
    for (const call of candidates) {
      const sid = call.sid as string;
      const link = links ? await links.find(sid) : undefined;
      const ours =
        link === undefined ||
        (link.jobId === request.jobId && link.taskId === request.taskId && link.attempt === request.attempt);
      if (ours) {
        this.#ambiguousAt.delete(key);
        return { kind: 'accepted', callId: sid, duplicate: true };
      }
    }
    this.#ambiguousAt.delete(key);
    return 'none';
  }

  /** A read (or an update) whose failure is thrown as the port says. */
  async #read(url: string, method: 'GET' | 'POST', form?: URLSearchParams): Promise<Answer> {
    const token = await this.#options.authToken();
    if (token === undefined) {
      throw new TelephonyRequestError(401, 'twilio_no_auth_token', 'no Twilio auth token is stored');
    }
    const answer = await this.#send(token, url, method, form);
    if (typeof answer === 'string') throw new TelephonyUnavailableError(`Twilio: ${answer}`);
    if ((answer.status >= 200 && answer.status < 300) || answer.status === 404) return answer;
    const { code, message } = errorOf(answer);
    if (answer.status === 429 || answer.status >= 500) {
      throw new TelephonyUnavailableError(`Twilio HTTP ${answer.status} ${code}: ${message}`);
    }
    throw new TelephonyRequestError(answer.status, code, message);
  }

  async #send(
    token: string,
    url: string,
    method: 'GET' | 'POST',
    form?: URLSearchParams,
  ): Promise<Answer | string> {
    const authorization = `Basic ${Buffer.from(`${this.#options.settings.accountSid}:${token}`).toString('base64')}`;
    try {
      const response = await this.#fetch(url, {
        method,
        headers: {
          authorization,
          accept: 'application/json',
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        ...(form ? { body: form.toString() } : {}),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      const text = await response.text();
      let body: Record<string, unknown> | undefined;
      try {
        const parsed = text === '' ? undefined : (JSON.parse(text) as unknown);
        body =
          typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
      } catch {
        body = undefined;
      }
      return { status: response.status, headers: response.headers, body };
    } catch (error) {
      return transportFailure(error, this.#timeoutMs);
    }
  }
}

/** Twilio's error body (`{code, message, more_info, status}`) as a code the task's reason names. */
function errorOf(answer: Answer): { code: string; message: string } {
  const code = answer.body?.code;
  const message = answer.body?.message;
  return {
    code: typeof code === 'number' || typeof code === 'string' ? `twilio_${code}` : `http_${answer.status}`,
    message: typeof message === 'string' ? message : `HTTP ${answer.status}`,
  };
}

function retryAfterMs(headers: Headers): number {
  const value = Number(headers.get('retry-after'));
  return Number.isFinite(value) && value > 0 ? Math.round(value * 1000) : DEFAULT_RETRY_AFTER_MS;
}
