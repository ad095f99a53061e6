/**
 * The API Gateway stand-in: an HTTP server that turns each request into an API Gateway HTTP API
 * (payload format 2.0) event, calls the Lambda handler of the matching route from the shared
 * route table, and writes the handler's result back as API Gateway would.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import { LAMBDA_PAYLOAD_MAX_BYTES } from '#shared/functions.ts';
import { type HttpFunctionId, matchRoute, type RouteSpec, routeKey } from '#shared/routes.ts';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './cloud.ts';
import { LocalCloudError } from './errors.ts';
import { decide } from './iam/policy.ts';
import { type JwtAuthorization, type JwtAuthorizerConfig, makeJwtAuthorizer } from './jwt-authorizer.ts';
import { type Handler, invokeHandler } from './lambda.ts';
import { SigV4Error, verifySigV4 } from './sigv4.ts';

/** API Gateway HTTP API's request payload limit. */
export const API_GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;
/** Lambda's synchronous invocation payload limit (the whole event, after base64; the result too). */
export const LAMBDA_MAX_EVENT_BYTES = LAMBDA_PAYLOAD_MAX_BYTES;

/**
 * A handler's result over Lambda's response limit. On AWS the runtime's post of the result is
 * refused (413, `RequestEntityTooLarge`: "Exceeded maximum allowed payload size"), the invocation
 * fails, and the HTTP API answers the caller 500 `{"message":"Internal Server Error"}`.
 */
export class ResponsePayloadTooLargeError extends LocalCloudError {}
/** HTTP API's integration timeout. */
export const API_GATEWAY_TIMEOUT_MS = 30_000;

export interface HttpFunction {
  readonly handler: Handler<APIGatewayProxyEventV2, APIGatewayProxyResultV2>;
  readonly timeoutMs: number;
}

export interface ApiGatewayOptions {
  readonly routes: readonly RouteSpec[];
  readonly functions: Partial<Record<HttpFunctionId, HttpFunction>>;
  readonly port?: number;
  readonly host?: string;
  /**
   * The credentials the IAM authorizer accepts on `auth: 'iam'` routes (secret by access key id),
   * and the region the API lives in. Default: the local cloud's.
   */
  readonly iam?: {
    readonly secrets: Readonly<Record<string, string>>;
    readonly region: string;
    /**
     * Identity policies by access key id: a caller listed here may invoke only what its
     * statements allow for `execute-api:Invoke` on the route's ARN (see {@link executeApiArn}),
     * explicit Deny first, as IAM decides. A key not listed is the local administrator.
     */
    readonly policies?: Readonly<Record<string, readonly InvokeStatement[]>>;
  };
  /**
   * The JWT authorizer of `auth: 'jwt'` routes (the console's): the user pool's issuer and app
   * client. Without it, those routes answer 401 to everyone.
   */
  readonly jwt?: JwtAuthorizerConfig;
  /** Called with every failed invocation (API Gateway logs them; the caller sees a bare 500). */
  readonly onError?: (error: unknown, routeKey: string) => void;
  /** A caller closed its connection mid-request (`METHOD /path`): one line, nothing to answer. */
  readonly onClientGone?: (request: string) => void;
}

export interface ApiGatewayServer {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Content types API Gateway passes as text; anything else (and a missing content type) arrives
 * base64-encoded with `isBase64Encoded: true`.
 */
export function isTextContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return (
    type.startsWith('text/') ||
    type === 'application/json' ||
    type.endsWith('+json') ||
    type === 'application/xml' ||
    type.endsWith('+xml') ||
    type === 'application/javascript'
  );
}

type GatewayRequest = Pick<http.IncomingMessage, 'method' | 'url' | 'rawHeaders' | 'httpVersion' | 'socket'>;

/** Builds the payload v2 event for a request whose body has been read in full. */
export function buildEventV2(
  req: GatewayRequest,
  body: Buffer,
  route: RouteSpec,
  pathParameters: Record<string, string>,
  now: Date = new Date(),
  authorizer?: JwtAuthorization,
): APIGatewayProxyEventV2 {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const { headers, cookies } = headersAndCookies(req.rawHeaders);
  const query = queryStringParameters(url);
  // API Gateway tells the integration how the caller reached it (a Twilio callback's URL is rebuilt from it).
  headers['x-forwarded-proto'] ??= 'http';
  headers['x-forwarded-port'] ??= String(req.socket.localPort ?? '');
  const hasBody = body.length > 0;
  const text = isTextContentType(headers['content-type']);
  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey: routeKey(route),
    rawPath: url.pathname,
    rawQueryString: rawQueryString(req.url ?? ''),
    headers,
    requestContext: requestContext(req, url, headers, route, now, authorizer),
    isBase64Encoded: hasBody ? !text : false,
  };
  if (cookies.length > 0) event.cookies = cookies;
  if (Object.keys(query).length > 0) event.queryStringParameters = query;
  if (Object.keys(pathParameters).length > 0) event.pathParameters = pathParameters;
  if (hasBody) event.body = text ? body.toString('utf8') : body.toString('base64');
  return event;
}

/** Headers by lower-case name, repeated ones joined with commas; cookies apart, one per entry. */
function headersAndCookies(rawHeaders: readonly string[]): {
  headers: Record<string, string>;
  cookies: string[];
} {
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const value = rawHeaders[i + 1]!;
    if (name === 'cookie') {
      cookies.push(
        ...value
          .split(';')
          .map((c) => c.trim())
          .filter(Boolean),
      );
      continue;
    }
    headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  return { headers, cookies };
}

/** Query parameters, a repeated one's values joined with commas. */
function queryStringParameters(url: URL): Record<string, string> {
  const query: Record<string, string> = {};
  for (const [key, value] of url.searchParams) {
    query[key] = query[key] === undefined ? value : `${query[key]},${value}`;
  }
  return query;
}

/** What follows the first `?` of the request target, as sent. */
function rawQueryString(target: string): string {
  return target.includes('?') ? target.slice(target.indexOf('?') + 1) : '';
}

function requestContext(
  req: GatewayRequest,
  url: URL,
  headers: Record<string, string>,
  route: RouteSpec,
  now: Date,
  authorizer: JwtAuthorization | undefined,
): APIGatewayProxyEventV2['requestContext'] {
  return {
    accountId: '000000000000',
    apiId: 'local',
    domainName: headers.host ?? 'localhost',
    domainPrefix: (headers.host ?? 'localhost').split('.')[0]!,
    http: {
      method: (req.method ?? 'GET').toUpperCase(),
      path: url.pathname,
      protocol: `HTTP/${req.httpVersion}`,
      sourceIp: req.socket.remoteAddress?.replace(/^::ffff:/, '') ?? '127.0.0.1',
      userAgent: headers['user-agent'] ?? '',
    },
    requestId: randomUUID(),
    routeKey: routeKey(route),
    stage: '$default',
    time: formatClf(now),
    timeEpoch: now.getTime(),
    ...(authorizer ? { authorizer } : {}),
  };
}

interface WrittenResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
}

/** Maps a handler's result to the HTTP response, with payload v2's rules for bare results. */
export function toHttpResponse(result: APIGatewayProxyResultV2): WrittenResponse {
  if (
    typeof result === 'object' &&
    result !== null &&
    'statusCode' in result &&
    result.statusCode !== undefined
  ) {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(result.headers ?? {})) headers[k.toLowerCase()] = String(v);
    if (result.cookies && result.cookies.length > 0) headers['set-cookie'] = result.cookies;
    const body = result.body
      ? result.isBase64Encoded
        ? Buffer.from(result.body, 'base64')
        : Buffer.from(result.body, 'utf8')
      : Buffer.alloc(0);
    return { status: result.statusCode, headers, body };
  }
  // A result without statusCode is taken as a 200 JSON body (payload format 2.0's inference).
  const body = typeof result === 'string' ? result : JSON.stringify(result);
  return {
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(body ?? '', 'utf8'),
  };
}

const jsonMessage = (status: number, message: string): WrittenResponse => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(JSON.stringify({ message })),
});

/** Starts the stand-in on 127.0.0.1 (a free port unless one is given). */
export async function startApiGateway(options: ApiGatewayOptions): Promise<ApiGatewayServer> {
  const authorizeJwt = options.jwt ? makeJwtAuthorizer(options.jwt) : undefined;
  const server = http.createServer((req, res) => {
    void handle(req, options, authorizeJwt).then(
      (out) => {
        const apigwHeaders = { 'apigw-requestid': randomUUID() };
        res.writeHead(out.status, {
          ...apigwHeaders,
          ...out.headers,
          'content-length': String(out.body.length),
        });
        res.end(out.body);
      },
      (error: unknown) => {
        if (error instanceof ClientWentAwayError) {
          // Nobody to answer: one line, no stack (API Gateway logs it as a 400 it never sent).
          (options.onClientGone ?? (() => {}))(`${req.method} ${req.url?.split('?')[0]}`);
          res.destroy();
          return;
        }
        options.onError?.(error, `${req.method} ${req.url}`);
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: 'Internal Server Error' }));
      },
    );
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The IAM authorizer: a valid SigV4 signature for `execute-api` in the API's region, by a known
 * access key, within 15 minutes of now — else 403 as API Gateway answers (`Forbidden` when
 * unsigned, the signature problem otherwise). Source: API Gateway developer guide, "Control access
 * to an HTTP API with IAM authorization".
 */
/** An identity policy statement about `execute-api:Invoke`. */
export interface InvokeStatement {
  readonly effect: 'Allow' | 'Deny';
  readonly actions: readonly string[];
  readonly resources: readonly string[];
}

/** The local API's account, id and stage in an `execute-api` ARN. */
export const LOCAL_ACCOUNT = '000000000000';
export const LOCAL_API_ID = 'localapi';
export const LOCAL_STAGE = '$default';

/**
 * The resource IAM evaluates for an invocation of an HTTP API with IAM authorization:
 * `arn:aws:execute-api:{region}:{account}:{api-id}/{stage}/{METHOD}/{resource-path}` (API
 * Gateway developer guide, "Control access for invoking an API").
 */
export function executeApiArn(region: string, method: string, path: string): string {
  return `arn:aws:execute-api:${region}:${LOCAL_ACCOUNT}:${LOCAL_API_ID}/${LOCAL_STAGE}/${method.toUpperCase()}${path}`;
}

function iamAuthorizerRefusal(
  req: http.IncomingMessage,
  body: Buffer,
  options: ApiGatewayOptions,
): WrittenResponse | undefined {
  const iam = options.iam ?? {
    secrets: { [LOCAL_CREDENTIALS.accessKeyId]: LOCAL_CREDENTIALS.secretAccessKey },
    region: LOCAL_REGION,
  };
  try {
    const { accessKeyId } = verifySigV4(
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
      { secrets: iam.secrets, region: iam.region, service: 'execute-api', body },
    );
    const policy = 'policies' in iam ? iam.policies?.[accessKeyId] : undefined;
    if (!policy) return undefined;
    const path = (req.url ?? '/').split('?')[0]!;
    const decision = decide(
      policy.map((s, i) => ({ ...s, principals: [], conditions: [], source: `statement ${i}` })),
      {
        action: 'execute-api:Invoke',
        resource: executeApiArn(iam.region, req.method ?? 'GET', path),
        context: {},
      },
    );
    return decision.allowed ? undefined : jsonMessage(403, 'Forbidden');
  } catch (error) {
    if (!(error instanceof SigV4Error)) throw error;
    return jsonMessage(
      403,
      error.code === 'AccessDenied' && /not signed/.test(error.message) ? 'Forbidden' : error.message,
    );
  }
}

/** HTTP API's answer to a body over its 10 MB payload limit. */
const bodyTooLarge = (): WrittenResponse => ({
  status: 413,
  headers: { 'content-type': 'text/plain; charset=utf-8' },
  body: Buffer.from(`HTTP content length exceeded ${API_GATEWAY_MAX_BODY_BYTES} bytes.`),
});

async function handle(
  req: http.IncomingMessage,
  options: ApiGatewayOptions,
  authorizeJwt: ReturnType<typeof makeJwtAuthorizer> | undefined,
): Promise<WrittenResponse> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > API_GATEWAY_MAX_BODY_BYTES) {
    req.resume();
    return bodyTooLarge();
  }
  const body = await readBody(req, API_GATEWAY_MAX_BODY_BYTES);
  if (body === 'too-large') return bodyTooLarge();
  const path = (req.url ?? '/').split('?')[0]!;
  const match = matchRoute(options.routes, req.method ?? 'GET', path);
  if (!match) return jsonMessage(404, 'Not Found');
  const fn = options.functions[match.route.functionId];
  if (!fn) return jsonMessage(404, 'Not Found');
  if (match.route.auth === 'iam') {
    const refused = iamAuthorizerRefusal(req, body, options);
    if (refused) return refused;
  }
  let authorizer: JwtAuthorization | undefined;
  if (match.route.auth === 'jwt') {
    const header = req.headers.authorization;
    const decision = authorizeJwt
      ? await authorizeJwt(header)
      : { refusal: { status: 401 as const, wwwAuthenticate: 'Bearer' } };
    if ('refusal' in decision) {
      return {
        ...jsonMessage(401, 'Unauthorized'),
        headers: { 'content-type': 'application/json', 'www-authenticate': decision.refusal.wwwAuthenticate },
      };
    }
    authorizer = decision.authorizer;
  }
  const event = buildEventV2(req, body, match.route, match.pathParameters, new Date(), authorizer);
  if (Buffer.byteLength(JSON.stringify(event)) > LAMBDA_MAX_EVENT_BYTES) {
    return jsonMessage(413, 'Request Too Long');
  }
  try {
    const result = await invokeHandler(fn.handler, event, {
      functionName: match.route.functionId,
      timeoutMs: Math.min(fn.timeoutMs, API_GATEWAY_TIMEOUT_MS),
    });
    assertResponseFits(result);
    return toHttpResponse(result);
  } catch (error) {
    options.onError?.(error, routeKey(match.route));
    if (error instanceof Error && error.name === 'LambdaTimeoutError')
      return jsonMessage(503, 'Service Unavailable');
    return jsonMessage(500, 'Internal Server Error');
  }
}

/** Throws {@link ResponsePayloadTooLargeError} when the result, as JSON, is over Lambda's response limit. */
function assertResponseFits(result: APIGatewayProxyResultV2): void {
  const size = Buffer.byteLength(JSON.stringify(result) ?? '');
  if (size > LAMBDA_PAYLOAD_MAX_BYTES)
    throw new ResponsePayloadTooLargeError(
      `Response payload size (${size} bytes) exceeded maximum allowed payload size (${LAMBDA_PAYLOAD_MAX_BYTES} bytes)`,
    );
}

/** The caller closed its connection before its request's body had arrived. */
class ClientWentAwayError extends LocalCloudError {}

function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? 'too-large' : Buffer.concat(chunks)));
    req.on('error', (error) =>
      reject(req.complete ? error : new ClientWentAwayError(error.message, { cause: error })),
    );
  });
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** API Gateway's `requestContext.time` format: `12/Mar/2020:19:03:58 +0000`. */
function formatClf(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}
