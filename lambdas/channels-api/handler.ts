/**
 * The channels API (API Gateway HTTP API → Lambda): a client's LINE channels listed, shown,
 * created or replaced, and their secret rotated. Its own function, so only it (and the webhook
 * functions) may decrypt the channels table: the jobs API never can. Every answer is a
 * {@link ChannelView}: no secret or token ever leaves, not even masked. Console routes are
 * answered only for a client the user belongs to, as the jobs API's are.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ChannelConflictError, ChannelNotFoundError, type ChannelsApi } from '#shared/channels/api.ts';
import { InvalidChannelError } from '#shared/channels/channel-input.ts';
import {
  answerOrRefuse,
  jsonRequestBody,
  jsonResponse,
  MalformedRequestError,
} from '#shared/http/api-gateway.ts';
import type { Logger } from '#shared/log.ts';
import { consoleRefusal } from '#shared/operators/console-request.ts';
import { operatorRouteKey } from '#shared/routes.ts';

function toHttpError(error: unknown): APIGatewayProxyStructuredResultV2 | undefined {
  if (error instanceof InvalidChannelError)
    return jsonResponse(400, { message: error.message, fieldErrors: error.fieldErrors });
  if (error instanceof MalformedRequestError)
    return jsonResponse(400, { message: error.message, fieldErrors: {} });
  if (error instanceof ChannelNotFoundError) return jsonResponse(404, { message: error.message });
  if (error instanceof ChannelConflictError) return jsonResponse(409, { message: error.message });
  return undefined;
}

export function makeChannelsApiHandler(deps: { readonly api: ChannelsApi; readonly log: Logger }) {
  const { api } = deps;
  const route = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const refused = consoleRefusal(event);
    if (refused) return refused;
    const clientId = event.pathParameters?.clientId ?? '';
    const channelId = event.pathParameters?.channelId ?? '';
    switch (operatorRouteKey(event.routeKey)) {
      case 'GET /clients/{clientId}/channels':
        return jsonResponse(200, await api.list(clientId));
      case 'GET /clients/{clientId}/channels/{channelId}':
        return jsonResponse(200, await api.get(clientId, channelId));
      case 'PUT /clients/{clientId}/channels/{channelId}': {
        const { channel, created } = await api.put(clientId, channelId, jsonRequestBody(event));
        return jsonResponse(created ? 201 : 200, channel);
      }
      case 'POST /clients/{clientId}/channels/{channelId}/rotate-secret':
        return jsonResponse(200, await api.rotateSecret(clientId, channelId, jsonRequestBody(event)));
      default:
        return jsonResponse(404, { message: 'Not Found' });
    }
  };
  // A refusal's message is left out of its log line: no secret reaches the log.
  return middy(answerOrRefuse(route, { toHttpError, log: deps.log, logRefusalReason: false }));
}
