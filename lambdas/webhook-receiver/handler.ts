/**
 * The webhook receiver (API Gateway HTTP API → Lambda): parse the request, call the receive use
 * case, map its result and typed errors to HTTP. Nothing here talks to AWS directly.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { decodeRequestBody, jsonResponse } from '#shared/http/api-gateway.ts';
import { InvalidWebhookBodyError } from '#shared/line/webhook.ts';
import type { Logger } from '#shared/log.ts';
import {
  PayloadTooLargeError,
  type ReceiveRequest,
  type SetAsideEvent,
  SignatureError,
  UnknownChannelError,
} from '#shared/webhooks/receive.ts';

/** The one mapping from the receive use case's typed errors to HTTP statuses. */
export function toHttpError(error: unknown): APIGatewayProxyStructuredResultV2 | undefined {
  if (error instanceof UnknownChannelError) return jsonResponse(404, { message: 'unknown channel' });
  if (error instanceof SignatureError) return jsonResponse(401, { message: error.message });
  if (error instanceof InvalidWebhookBodyError) return jsonResponse(400, { message: error.message });
  if (error instanceof PayloadTooLargeError) return jsonResponse(413, { message: error.message });
  return undefined;
}

export function makeReceiverHandler(deps: {
  receive: (
    request: ReceiveRequest,
  ) => Promise<{ accepted: number; eventIds?: readonly string[]; setAside?: readonly SetAsideEvent[] }>;
  log: Logger;
  /** Default `Date.now`: the acknowledgement latency is measured from API Gateway's request time. */
  now?: () => number;
}) {
  const now = deps.now ?? Date.now;
  return middy(async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const channelId = event.pathParameters?.channelId ?? '';
    try {
      const {
        accepted,
        eventIds = [],
        setAside = [],
      } = await deps.receive({
        channelId,
        headers: event.headers,
        rawBody: decodeRequestBody(event),
      });
      if (accepted > 0) {
        deps.log.info('webhook events queued', { channelId, eventIds });
        deps.log.metrics({ WebhookEventsAccepted: accepted }, { channelId }, { rollUp: true });
        // What LINE waits for (2 s at most): from API Gateway's receipt to this answer.
        const receivedAt = event.requestContext?.timeEpoch;
        if (receivedAt)
          deps.log.metrics(
            { WebhookAckLatency: Math.max(0, now() - receivedAt) },
            { channelId },
            { unit: 'Milliseconds', highResolution: true, gauge: true, rollUp: true },
          );
      }
      // Ids and reasons only: an event's content is a customer's message.
      for (const event of setAside)
        deps.log.warn('webhook event set aside, not queued', { channelId, ...event });
      return jsonResponse(200, { accepted });
    } catch (error) {
      const mapped = toHttpError(error);
      if (mapped) {
        deps.log.warn('webhook refused', {
          channelId,
          status: mapped.statusCode,
          reason: (error as Error).message,
        });
        return mapped;
      }
      // LINE redelivers on a 5xx (when redelivery is on): the dedupe id makes that safe.
      deps.log.error('webhook not stashed', { channelId, error });
      return jsonResponse(500, { message: 'internal error' });
    }
  });
}
