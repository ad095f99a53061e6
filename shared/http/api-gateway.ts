/**
 * What every Lambda behind the HTTP API (payload format 2.0) needs from its event and for its
 * answer: headers in any letter case, the raw body bytes (base64 or text, as API Gateway chose),
 * and a JSON response. One home, so the three handlers read requests the same way.
 */
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

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
export class MalformedRequestError extends Error {
  override name = 'MalformedRequestError';
}

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
