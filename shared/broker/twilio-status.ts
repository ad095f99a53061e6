/**
 * The Twilio status-callback use case (`POST /providers/twilio/calls/status?client=…&job=…&task=…&attempt=…`):
 * the client named in the URL gives the auth token(s) to check `X-Twilio-Signature` with; the
 * signature covers the URL, so once it verifies, the attempt the URL names is the one Switchboard
 * gave Twilio for this call. The callback is then recorded through the same path as every other
 * provider's (settle once, nudge the broker). Twilio sends callbacks out of order and sometimes
 * twice: `SequenceNumber` orders them and a final status is never undone (`mergeStatus`' rule).
 *
 * The same route takes a `<Gather>`'s action request (it has `Digits`): the client's TwiML cannot
 * know the attempt, so its action URL names the client only (`?client=…`) and the attempt is the
 * one the broker linked the call's `CallSid` to (`CALL#{CallSid}`, `dynamo-call-links.ts`). Key
 * {@link TWILIO_OPT_OUT_DIGITS} puts the number on the client's suppression list (`optOut`).
 */
import { attemptKey } from '#shared/retry-keys.ts';
import { CallbackSecretNotSetError } from '#shared/telephony/callback-secrets.ts';
import { SignatureMismatchError } from '#shared/telephony/callback-signature.ts';
import {
  type FormParams,
  parseForm,
  TWILIO_OPT_OUT_DIGITS,
  twilioStatusEvent,
  verifyTwilioSignature,
} from '#shared/telephony/twilio.ts';
import type { CallLinkStore } from './ports.ts';
import {
  type AttemptRef,
  attemptRefFromQuery,
  type CallStatusOutcome,
  makeRecordCallEvent,
  type RecordCallEventDeps,
} from './settle.ts';

export interface TwilioStatusRequest {
  readonly signature: string | undefined;
  /** `X-Twilio-Webhooks-Signature-Settings`, when Twilio signed with a Webhook Setting's key. */
  readonly signatureSettings?: string | undefined;
  readonly rawBody: string | Uint8Array;
  readonly query: Readonly<Record<string, string | undefined>>;
  /**
   * The URLs Twilio may have signed: the status route's configured public URL with the request's
   * raw query string, and the URL as the request reached the API (host and path it carried).
   */
  readonly urls: readonly string[];
}

export interface RecordTwilioStatusDeps extends RecordCallEventDeps {
  /** The client's auth tokens in force (current first); throws `CallbackSecretNotSetError` when none. */
  readonly authTokens: (clientId: string) => Promise<readonly string[]>;
  /** The attempt a call's `CallSid` was linked to, for a Gather's action request that names none. */
  readonly links?: Pick<CallLinkStore, 'find'>;
}

/** True for a `<Gather>`'s action request (it reports the keys pressed), which Twilio expects TwiML from. */
export function isGatherAction(rawBody: string | Uint8Array): boolean {
  const body = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8');
  return parseForm(body).some(([name]) => name === 'Digits');
}

/** Throws `CallbackSignatureError` (401) or `MalformedCallStatusError` (400); see {@link TwilioStatusRequest}. */
export function makeRecordTwilioStatus(deps: RecordTwilioStatusDeps) {
  const record = makeRecordCallEvent(deps);
  return async (request: TwilioStatusRequest): Promise<CallStatusOutcome> => {
    const clientId = request.query.client;
    let authTokens: readonly string[] = [];
    if (clientId && /^[A-Za-z0-9_-]{1,64}$/.test(clientId)) {
      try {
        authTokens = await deps.authTokens(clientId);
      } catch (error) {
        if (!(error instanceof CallbackSecretNotSetError)) throw error;
      }
    }
    // No client, or one without a token: nothing can verify it, answered as any bad signature is.
    if (authTokens.length === 0) throw new SignatureMismatchError('X-Twilio-Signature cannot be verified');
    const rawBody =
      typeof request.rawBody === 'string' ? request.rawBody : Buffer.from(request.rawBody).toString('utf8');
    const params = parseForm(rawBody);
    verifyTwilioSignature({
      header: request.signature,
      settings: request.signatureSettings,
      urls: request.urls,
      params,
      authTokens,
    });
    const ref = await attemptOf(request.query, params, clientId!, deps.links);
    if (!ref) return 'unknown-task';
    const event = twilioStatusEvent(params, attemptKey(ref.jobId, ref.taskId, ref.attempt), deps.clock.now());
    return record({ ...ref, clientId: clientId! }, event);
  };
}

/**
 * The attempt a verified request is about: the one its URL names (a status callback), else, for
 * a Gather's action request, the one its call is linked to when the link is the client's.
 */
async function attemptOf(
  query: TwilioStatusRequest['query'],
  params: FormParams,
  clientId: string,
  links: RecordTwilioStatusDeps['links'],
): Promise<AttemptRef | undefined> {
  const get = (name: string) => params.find(([n]) => n === name)?.[1];
  const named = query.job !== undefined || query.task !== undefined || query.attempt !== undefined;
  if (named || get('Digits') === undefined || !links) return attemptRefFromQuery(query);
  // Only the opt-out key is worth a read: any other key is the client's flow's own business.
  if (get('Digits') !== TWILIO_OPT_OUT_DIGITS) return undefined;
  const callSid = get('CallSid');
  const link = callSid ? await links.find(callSid) : undefined;
  if (!link || link.clientId !== clientId) return undefined;
  return { jobId: link.jobId, taskId: link.taskId, attempt: link.attempt };
}
