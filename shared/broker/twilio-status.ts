/**
 * The Twilio status-callback use case (`POST /providers/twilio/calls/status?client=…&job=…&task=…&attempt=…`):
 * the client named in the URL gives the auth token(s) to check `X-Twilio-Signature` with; the
 * signature covers the URL, so once it verifies, the attempt the URL names is the one Switchboard
 * gave Twilio for this call. The callback is then recorded through the same path as every other
 * provider's (settle once, nudge the broker). Twilio sends callbacks out of order and sometimes
 * twice: `SequenceNumber` orders them and a final status is never undone (`mergeStatus`' rule).
 */
import { attemptKey } from '#shared/retry-keys.ts';
import { CallbackSecretNotSetError } from '#shared/telephony/callback-secrets.ts';
import { SignatureMismatchError } from '#shared/telephony/callback-signature.ts';
import { parseForm, twilioStatusEvent, verifyTwilioSignature } from '#shared/telephony/twilio.ts';
import {
  attemptRefFromQuery,
  type CallStatusOutcome,
  makeRecordCallEvent,
  type RecordCallEventDeps,
} from './settle.ts';

export interface TwilioStatusRequest {
  readonly signature: string | undefined;
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
    verifyTwilioSignature({ header: request.signature, urls: request.urls, params, authTokens });
    const ref = attemptRefFromQuery(request.query);
    const event = twilioStatusEvent(params, attemptKey(ref.jobId, ref.taskId, ref.attempt), deps.clock.now());
    return record({ ...ref, clientId: clientId! }, event);
  };
}
