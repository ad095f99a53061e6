/**
 * Tenancy at the door of every Lambda behind the console's routes: the operator API's routes arrive
 * twice, as IAM-authorised operator calls and under `/console/api` with a user pool token the
 * gateway's JWT authorizer verified. A console request is answered only for a client the user
 * belongs to, in a role that allows the route (`./tenancy.ts`, the route's `role` in
 * `shared/routes.ts`); an operator request was decided by IAM.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { jsonResponse } from '#shared/http/api-gateway.ts';
import { CONSOLE_API_PREFIX, operatorRouteKey, operatorRoutes, routeKey } from '#shared/routes.ts';
import {
  type ClaimValue,
  type ClientRole,
  includesRole,
  type Operator,
  operatorFromClaims,
  roleIn,
} from './tenancy.ts';

/** The role each operator route needs, by its route key (`PUT /clients/{clientId}`). */
const ROLE_OF_ROUTE = new Map(operatorRoutes.map((route) => [routeKey(route), route.role]));

/** A role as a sentence names it: "a viewer", "an operator", "an admin". */
function aRole(role: ClientRole): string {
  return `${role === 'viewer' ? 'a' : 'an'} ${role}`;
}

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
  if (clientId === undefined) return undefined;
  const role = roleIn(operator, clientId);
  if (role === undefined) {
    return jsonResponse(403, { message: `Forbidden: you do not belong to client ${clientId}` });
  }
  // A route missing from the table needs the most (a route added without a role is closed, not open).
  const needed = ROLE_OF_ROUTE.get(operatorRouteKey(event.routeKey)) ?? 'admin';
  if (!includesRole(role, needed)) {
    return jsonResponse(403, {
      message: `Forbidden: you are ${aRole(role)} of client ${clientId}; this needs ${aRole(needed)}`,
    });
  }
  return undefined;
}
