/**
 * What every Lambda behind the HTTP API (payload format 2.0) needs from its event and for its
 * answer: headers in any letter case, the raw body bytes (base64 or text, as API Gateway chose),
 * and a JSON response; and the one try/refuse/500 around a route. One home, so the handlers read
 * requests and answer errors the same way.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { Logger } from '#shared/log.ts';
import { HttpError } from './errors.ts';

/** Headers as API Gateway (HTTP API, payload v2) hands them over. */
export type HttpHeaders = Readonly<Record<string, string | undefined>> | null | undefined;

/**
 * A header's value whatever the case of its name (API Gateway v2 lower-cases names, other callers
 * may not). Repeated headers arrive comma-joined, as API Gateway v2 joins them.
 */
export function getHeader(headers: HttpHeaders, name: string): string | undefined {
  if (!headers) return undefined;
  const exact = headers[name];
  if (exact !== undefined) return exact;
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (const [key, value] of Object.entries(headers)) {
    if (value !== undefined && key.toLowerCase() === wanted) values.push(value);
  }
  return values.length === 0 ? undefined : values.join(',');
}

/** The part of an API Gateway v2 event that carries the request body. */
export interface HttpBodyEvent {
  readonly body?: string | null;
  readonly isBase64Encoded?: boolean;
}

/**
 * The request body's raw bytes: API Gateway base64-encodes bodies it does not treat as text
 * (`isBase64Encoded`), and hands text bodies over as a string of the original UTF-8.
 */
export function decodeRequestBody(event: HttpBodyEvent): Buffer {
  const body = event.body ?? '';
  return event.isBase64Encoded ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
}

/** A request whose body is not what the route takes (answered 400). */
export class MalformedRequestError extends HttpError {}

/** The request body as JSON (`{}` when empty), or {@link MalformedRequestError}. */
export function jsonRequestBody(event: HttpBodyEvent): unknown {
  const bytes = decodeRequestBody(event);
  if (bytes.length === 0) return {};
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new MalformedRequestError('the body is not JSON');
  }
}

/** A JSON answer. */
export function jsonResponse(
  statusCode: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  };
}

/** A route of an HTTP API Lambda: its answer to one request. */
export type HttpRoute = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

/**
 * `route`'s answer, or, when it throws, the transport's answer to the error: a typed error that
 * `toHttpError` maps is answered with its status and logged at info as refused; anything else is
 * logged as failed and answered 500 with no detail, so no internal reaches the caller.
 */
export function answerOrRefuse(
  route: HttpRoute,
  options: {
    /** The one mapping from the use cases' typed errors to HTTP statuses. */
    readonly toHttpError: (error: unknown) => APIGatewayProxyStructuredResultV2 | undefined;
    readonly log: Logger;
    /** Whether a refusal's log line carries the error's message (not where a message may quote a secret). */
    readonly logRefusalReason: boolean;
  },
): HttpRoute {
  const { toHttpError, log, logRefusalReason } = options;
  return async (event) => {
    try {
      return await route(event);
    } catch (error) {
      const mapped = toHttpError(error);
      if (mapped) {
        log.info('request refused', {
          route: event.routeKey,
          status: mapped.statusCode,
          ...(logRefusalReason ? { reason: (error as Error).message } : {}),
        });
        return mapped;
      }
      log.error('request failed', { route: event.routeKey, error });
      return jsonResponse(500, { message: 'internal error' });
    }
  };
}
