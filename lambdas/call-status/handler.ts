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
import { decodeRequestBody, getHeader, jsonResponse } from '#shared/http/api-gateway.ts';
import type { Logger } from '#shared/log.ts';
import { CallbackSecretNotSetError } from '#shared/telephony/callback-secrets.ts';
import { CALLBACK_SIGNATURE_HEADER, CallbackSignatureError } from '#shared/telephony/callback-signature.ts';
import { MalformedCallStatusError } from '#shared/telephony/status-event.ts';

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

export function makeCallStatusHandler(deps: {
  /** The provider name this deployment takes callbacks from (the `{provider}` path segment). */
  provider: string;
  record: (request: CallStatusRequest) => Promise<CallStatusOutcome>;
  log: Logger;
}) {
  return middy(async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const provider = event.pathParameters?.provider ?? '';
    if (provider !== deps.provider) return jsonResponse(404, { message: 'unknown provider' });
    try {
      const outcome = await deps.record({
        signature: getHeader(event.headers, CALLBACK_SIGNATURE_HEADER),
        rawBody: decodeRequestBody(event),
        ref: () => attemptRefFromQuery(event.queryStringParameters ?? {}),
      });
      deps.log.metrics({ CallStatusCallbacks: 1 }, { outcome });
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
