/**
 * The HTTP API's route table, shared by `cdk/` (API Gateway routes and integrations) and
 * `local/` (the API Gateway stand-in), so the local cloud cannot drift from what is deployed.
 */
import type { ClientRole } from '#shared/operators/tenancy.ts';

/** Lambdas that sit behind the HTTP API. */
export type HttpFunctionId =
  | 'webhook-receiver'
  | 'jobs-api'
  | 'channels-api'
  | 'call-status'
  | 'console'
  | 'unsubscribe';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RouteSpec {
  readonly method: HttpMethod;
  /** API Gateway route path, with `{name}` path parameters. */
  readonly path: string;
  readonly functionId: HttpFunctionId;
  /**
   * `none`: public (signed by the caller, or static); `iam`: SigV4-signed operator calls; `jwt`:
   * the console's calls, with a Cognito user pool token the gateway's JWT authorizer verifies.
   */
  readonly auth: 'none' | 'iam' | 'jwt';
  /**
   * An operator route's least role in its client for a console user (`shared/operators/tenancy.ts`):
   * `viewer` reads, `operator` runs jobs and the suppression list, `admin` changes settings and
   * channels. IAM decides for SigV4 calls.
   */
  readonly role?: ClientRole;
}

/** An operator route: every one names the role a console user needs for it. */
export interface OperatorRoute extends RouteSpec {
  readonly role: ClientRole;
}

/** Where the console's copy of the operator API lives: the same routes, behind the JWT authorizer. */
export const CONSOLE_API_PREFIX = '/console/api';

/** An operator route (SigV4-signed), of the jobs API unless another function is named. */
function operatorRoute(
  method: HttpMethod,
  path: string,
  role: ClientRole,
  functionId: HttpFunctionId = 'jobs-api',
): OperatorRoute {
  return { method, path, functionId, auth: 'iam', role };
}

/**
 * The operator API: client settings, jobs and channels (SigV4-signed calls only), each with the
 * least role a console user needs for it in the client (the console's authorization matrix).
 */
export const operatorRoutes: readonly OperatorRoute[] = [
  operatorRoute('GET', '/clients', 'viewer'),
  operatorRoute('PUT', '/clients/{clientId}', 'admin'),
  operatorRoute('GET', '/clients/{clientId}', 'viewer'),
  operatorRoute('POST', '/clients/{clientId}/pause', 'operator'),
  operatorRoute('POST', '/clients/{clientId}/resume', 'operator'),
  operatorRoute('GET', '/clients/{clientId}/opt-outs', 'viewer'),
  operatorRoute('GET', '/clients/{clientId}/suppressions', 'viewer'),
  operatorRoute('POST', '/clients/{clientId}/suppressions', 'operator'),
  operatorRoute('DELETE', '/clients/{clientId}/suppressions/{recipient}', 'operator'),
  // People: the identifiers of one customer (shared/people/api.ts).
  operatorRoute('GET', '/clients/{clientId}/people/{identifier}', 'viewer'),
  operatorRoute('GET', '/clients/{clientId}/people/{identifier}/history', 'viewer'),
  operatorRoute('POST', '/clients/{clientId}/people', 'operator'),
  operatorRoute('DELETE', '/clients/{clientId}/people/{identifier}', 'operator'),
  operatorRoute('POST', '/clients/{clientId}/jobs', 'operator'),
  operatorRoute('GET', '/clients/{clientId}/jobs', 'viewer'),
  operatorRoute('GET', '/clients/{clientId}/jobs/{jobId}', 'viewer'),
  operatorRoute('POST', '/clients/{clientId}/jobs/{jobId}/pause', 'operator'),
  operatorRoute('POST', '/clients/{clientId}/jobs/{jobId}/resume', 'operator'),
  operatorRoute('POST', '/clients/{clientId}/jobs/{jobId}/cancel', 'operator'),
  operatorRoute('GET', '/clients/{clientId}/jobs/{jobId}/report', 'viewer'),
  operatorRoute('GET', '/clients/{clientId}/jobs/{jobId}/row-problems', 'viewer'),
  operatorRoute('GET', '/clients/{clientId}/channels', 'viewer', 'channels-api'),
  operatorRoute('GET', '/clients/{clientId}/channels/{channelId}', 'viewer', 'channels-api'),
  operatorRoute('PUT', '/clients/{clientId}/channels/{channelId}', 'admin', 'channels-api'),
  operatorRoute('POST', '/clients/{clientId}/channels/{channelId}/rotate-secret', 'admin', 'channels-api'),
  // The job's series over time (the console's chart): one Query of its samples, never its tasks.
  operatorRoute('GET', '/clients/{clientId}/jobs/{jobId}/series', 'viewer'),
];

/**
 * The console's routes: the page and its files (public: they hold no data), who the signed-in user
 * is, and every operator route again under {@link CONSOLE_API_PREFIX} with `jwt` auth. The handler
 * answers a console route only for a client the user belongs to (`shared/operators/tenancy.ts`).
 */
export const consoleRoutes: readonly RouteSpec[] = [
  { method: 'GET', path: '/', functionId: 'console', auth: 'none' },
  { method: 'GET', path: '/console', functionId: 'console', auth: 'none' },
  { method: 'GET', path: '/console/{file}', functionId: 'console', auth: 'none' },
  { method: 'GET', path: `${CONSOLE_API_PREFIX}/me`, functionId: 'jobs-api', auth: 'jwt' },
  ...operatorRoutes.map(
    (route): RouteSpec => ({ ...route, path: `${CONSOLE_API_PREFIX}${route.path}`, auth: 'jwt' }),
  ),
];

/**
 * An email's one-click unsubscribe link (RFC 8058; `docs/email.md`): public, as a mail client's POST
 * carries no credential; the signed token in the path is the authority. GET shows a confirm page
 * and changes nothing (mail scanners follow links); POST suppresses the address.
 */
export const UNSUBSCRIBE_PATH = '/unsubscribe/{token}';
/** The unsubscribe links' base URL path: a link is the API's URL, this, `/` and the token. */
export const UNSUBSCRIBE_BASE_PATH = UNSUBSCRIBE_PATH.slice(0, -'/{token}'.length);

export const routes: readonly RouteSpec[] = [
  { method: 'POST', path: '/webhooks/line/{channelId}', functionId: 'webhook-receiver', auth: 'none' },
  { method: 'POST', path: '/providers/{provider}/calls/status', functionId: 'call-status', auth: 'none' },
  { method: 'GET', path: UNSUBSCRIBE_PATH, functionId: 'unsubscribe', auth: 'none' },
  { method: 'POST', path: UNSUBSCRIBE_PATH, functionId: 'unsubscribe', auth: 'none' },
  ...operatorRoutes,
  ...consoleRoutes,
];

/**
 * The operator route a console route stands for (`GET /console/api/clients/{clientId}` →
 * `GET /clients/{clientId}`), or the route key itself when it is not a console API route.
 */
export function operatorRouteKey(key: string): string {
  const space = key.indexOf(' ');
  const path = key.slice(space + 1);
  return path.startsWith(`${CONSOLE_API_PREFIX}/`)
    ? `${key.slice(0, space)} ${path.slice(CONSOLE_API_PREFIX.length)}`
    : key;
}

/** The API Gateway route key of a route, e.g. `POST /webhooks/line/{channelId}`. */
export function routeKey(route: RouteSpec): string {
  return `${route.method} ${route.path}`;
}

export interface RouteMatch {
  readonly route: RouteSpec;
  readonly pathParameters: Record<string, string>;
}

/**
 * Finds the route for a method and raw path the way API Gateway does: literal segments must be
 * equal, `{name}` matches one non-empty segment (URL-decoded into `pathParameters`). No match is
 * API Gateway's 404, whatever the method.
 */
export function matchRoute(
  table: readonly RouteSpec[],
  method: string,
  rawPath: string,
): RouteMatch | undefined {
  const segments = rawPath.split('/').slice(1);
  for (const route of table) {
    const pattern = route.path.split('/').slice(1);
    if (pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < pattern.length; i++) {
      const p = pattern[i]!;
      const s = segments[i]!;
      const param = /^\{(\w+)\}$/.exec(p);
      if (param) {
        if (s === '') {
          ok = false;
          break;
        }
        params[param[1]!] = safeDecode(s);
      } else if (p !== s) {
        ok = false;
        break;
      }
    }
    if (ok && route.method === method.toUpperCase()) return { route, pathParameters: params };
  }
  return undefined;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
