/**
 * Tenancy at the door of every Lambda behind the console's routes: the operator API's routes arrive
 * twice, as IAM-authorised operator calls and under `/console/api` with a user pool token the
 * gateway's JWT authorizer verified. A console request is answered only for a client the user
 * belongs to (`./tenancy.ts`); an operator request was decided by IAM.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { jsonResponse } from '#shared/http/api-gateway.ts';
import { CONSOLE_API_PREFIX } from '#shared/routes.ts';
import { type ClaimValue, mayActFor, type Operator, operatorFromClaims } from './tenancy.ts';

/** The console user of a `jwt` route, from the claims the gateway's JWT authorizer verified. */
export function consoleOperator(event: APIGatewayProxyEventV2): Operator | undefined {
  const authorizer = (
    event.requestContext as { authorizer?: { jwt?: { claims?: Record<string, ClaimValue> } } }
  ).authorizer;
  const claims = authorizer?.jwt?.claims;
  return claims ? operatorFromClaims(claims) : undefined;
}

/**
 * Tenancy for a console route: who is asking, and whether they may act for the route's client.
 * Answers the refusal, or undefined when the request may go on (an operator route: IAM decided).
 */
export function consoleRefusal(event: APIGatewayProxyEventV2): APIGatewayProxyStructuredResultV2 | undefined {
  if (!event.routeKey.includes(` ${CONSOLE_API_PREFIX}/`)) return undefined;
  const operator = consoleOperator(event);
  // Behind the JWT authorizer there are always claims; without them, nothing is answered.
  if (!operator) return jsonResponse(401, { message: 'Unauthorized' });
  const clientId = event.pathParameters?.clientId;
  if (clientId !== undefined && !mayActFor(operator, clientId)) {
    return jsonResponse(403, { message: `Forbidden: you do not belong to client ${clientId}` });
  }
  return undefined;
}
