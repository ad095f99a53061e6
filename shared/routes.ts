/**
 * The HTTP API's route table, shared by `cdk/` (API Gateway routes and integrations) and
 * `local/` (the API Gateway stand-in), so the local cloud cannot drift from what is deployed.
 */

/** Lambdas that sit behind the HTTP API. */
export type HttpFunctionId = 'webhook-receiver' | 'jobs-api' | 'call-status';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RouteSpec {
  readonly method: HttpMethod;
  /** API Gateway route path, with `{name}` path parameters. */
  readonly path: string;
  readonly functionId: HttpFunctionId;
  /** `none`: public (signed by the caller); `iam`: SigV4-signed operator calls. */
  readonly auth: 'none' | 'iam';
}

export const routes: readonly RouteSpec[] = [
  { method: 'POST', path: '/webhooks/line/{channelId}', functionId: 'webhook-receiver', auth: 'none' },
  { method: 'POST', path: '/providers/{provider}/calls/status', functionId: 'call-status', auth: 'none' },
  // Operator API: client settings and jobs (SigV4-signed calls only).
  { method: 'PUT', path: '/clients/{clientId}', functionId: 'jobs-api', auth: 'iam' },
  { method: 'GET', path: '/clients/{clientId}', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/pause', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/resume', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/jobs', functionId: 'jobs-api', auth: 'iam' },
  { method: 'GET', path: '/clients/{clientId}/jobs', functionId: 'jobs-api', auth: 'iam' },
  { method: 'GET', path: '/clients/{clientId}/jobs/{jobId}', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/jobs/{jobId}/pause', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/jobs/{jobId}/resume', functionId: 'jobs-api', auth: 'iam' },
  { method: 'POST', path: '/clients/{clientId}/jobs/{jobId}/cancel', functionId: 'jobs-api', auth: 'iam' },
  { method: 'GET', path: '/clients/{clientId}/jobs/{jobId}/report', functionId: 'jobs-api', auth: 'iam' },
];

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
