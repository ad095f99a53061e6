/**
 * The call-status route (`POST /providers/{provider}/calls/status`, API Gateway HTTP API →
 * Lambda): parse the request, call the record-call-status use case, map its result and typed
 * errors to HTTP. A 2xx tells the provider to stop redelivering, so anything we understood and
 * recorded — or can never use — is a 200; a 5xx makes the provider try again.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import {
  attemptRefFromQuery,
  CallbackMismatchError,
  type CallStatusOutcome,
  type CallStatusRequest,
} from '#shared/broker/settle.ts';
import { isGatherAction, type TwilioStatusRequest } from '#shared/broker/twilio-status.ts';
import { decodeRequestBody, getHeader, jsonResponse } from '#shared/http/api-gateway.ts';
import type { Logger } from '#shared/log.ts';
import { CallbackSecretNotSetError } from '#shared/telephony/callback-secrets.ts';
import { CALLBACK_SIGNATURE_HEADER, CallbackSignatureError } from '#shared/telephony/callback-signature.ts';
import { MalformedCallStatusError } from '#shared/telephony/status-event.ts';
import { TWILIO_SIGNATURE_HEADER, TWILIO_SIGNATURE_SETTINGS_HEADER } from '#shared/telephony/twilio.ts';

/** The one mapping from the use case's typed errors to HTTP statuses. */
export function toHttpError(error: unknown): APIGatewayProxyStructuredResultV2 | undefined {
  if (error instanceof CallbackSignatureError) return jsonResponse(401, { message: error.message });
  if (error instanceof MalformedCallStatusError) return jsonResponse(400, { message: error.message });
  if (error instanceof CallbackMismatchError) return jsonResponse(400, { message: error.message });
  // Nothing can be verified until an operator sets the secret: the provider should try again.
  if (error instanceof CallbackSecretNotSetError)
    return jsonResponse(503, { message: 'callbacks cannot be verified yet' });
  return undefined;
}

/** Twilio's callbacks: their use case and the public URL of their route (what Twilio signs). */
export interface TwilioCallbacks {
  readonly record: (request: TwilioStatusRequest) => Promise<CallStatusOutcome>;
  /** The route's URL as given to Twilio (`TWILIO_CALLBACK_URL`), without its query. */
  readonly publicUrl?: string;
}

/**
 * The URLs a Twilio callback may have been signed with: the configured public URL (right behind
 * a custom domain or a proxy) and the URL the request carried to API Gateway, each with the raw
 * query string exactly as sent.
 */
export function twilioSignedUrls(event: APIGatewayProxyEventV2, publicUrl: string | undefined): string[] {
  const query = event.rawQueryString ? `?${event.rawQueryString}` : '';
  const scheme = getHeader(event.headers, 'x-forwarded-proto') ?? 'https';
  const seen = `${scheme}://${event.requestContext.domainName}${event.rawPath}${query}`;
  return publicUrl === undefined ? [seen] : [...new Set([`${publicUrl}${query}`, seen])];
}

/** What a Gather's action request is answered: the key was taken, the call ends. */
const GATHER_ANSWER: APIGatewayProxyStructuredResultV2 = {
  statusCode: 200,
  headers: { 'content-type': 'text/xml; charset=utf-8' },
  body: '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>',
};

export function makeCallStatusHandler(deps: {
  /** The provider name this deployment takes callbacks from (the `{provider}` path segment). */
  provider: string;
  record: (request: CallStatusRequest) => Promise<CallStatusOutcome>;
  /** `POST /providers/twilio/calls/status`: clients whose calls go through Twilio. */
  twilio?: TwilioCallbacks;
  log: Logger;
}) {
  const { twilio } = deps;
  return middy(async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const provider = event.pathParameters?.provider ?? '';
    const isTwilio = twilio !== undefined && provider === 'twilio' && deps.provider !== 'twilio';
    if (provider !== deps.provider && !isTwilio) return jsonResponse(404, { message: 'unknown provider' });
    try {
      const outcome = isTwilio
        ? await twilio.record({
            signature: getHeader(event.headers, TWILIO_SIGNATURE_HEADER),
            signatureSettings: getHeader(event.headers, TWILIO_SIGNATURE_SETTINGS_HEADER),
            rawBody: decodeRequestBody(event),
            query: event.queryStringParameters ?? {},
            urls: twilioSignedUrls(event, twilio.publicUrl),
          })
        : await deps.record({
            signature: getHeader(event.headers, CALLBACK_SIGNATURE_HEADER),
            rawBody: decodeRequestBody(event),
            ref: () => attemptRefFromQuery(event.queryStringParameters ?? {}),
          });
      deps.log.metrics({ CallStatusCallbacks: 1 }, { outcome, provider });
      // A callback about no call of ours: acknowledged (no retries), said once.
      if (outcome === 'unknown-task') deps.log.info('status callback for no known task', { provider });
      // A Gather's action request runs what it is answered: TwiML that ends the call, never JSON
      // (Twilio would say "an application error has occurred" to the person).
      if (isTwilio && isGatherAction(decodeRequestBody(event))) return GATHER_ANSWER;
      return jsonResponse(200, { outcome });
    } catch (error) {
      const mapped = toHttpError(error);
      if (mapped) {
        const level = (mapped.statusCode ?? 500) >= 500 ? 'error' : 'warn';
        deps.log[level]('call status refused', {
          status: mapped.statusCode,
          reason: (error as Error).message,
        });
        return mapped;
      }
      // The provider redelivers on a 5xx; recording is idempotent.
      deps.log.error('call status not recorded', { error });
      return jsonResponse(500, { message: 'internal error' });
    }
  });
}
