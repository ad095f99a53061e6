/**
 * The operator console's files (API Gateway HTTP API → Lambda, public routes): the page, its
 * hashed scripts, styles and font files, and `config.json`, which tells the page where to sign
 * in. The files hold no data; every read and change goes through `/console/api`, behind the JWT
 * authorizer.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { jsonResponse } from '#shared/http/api-gateway.ts';

/** One file of the built console. */
export interface ConsoleFile {
  readonly body: Buffer;
  readonly contentType: string;
}

/** Where the page signs in: the user pool and its app client (and, locally, the emulator). */
export interface ConsoleConfig {
  readonly region: string;
  readonly userPoolId: string;
  readonly userPoolClientId: string;
  /** The Cognito endpoint, when it is not the region's (`npm start`'s emulator). */
  readonly cognitoEndpoint?: string;
}

/** The page itself: `index.html` in the built console. */
export const CONSOLE_PAGE = 'index.html';

/**
 * What the page may load and call: its own files and API, and Cognito's endpoint to sign in. No
 * inline script; styles set from script (the chart's) are allowed, as CSSOM writes are.
 */
function contentSecurityPolicy(config: ConsoleConfig, storageOrigin: string | undefined): string {
  const cognito = config.cognitoEndpoint ?? `https://cognito-idp.${config.region}.amazonaws.com`;
  // Uploads and large reports go to presigned S3 URLs: S3's own hosts in AWS, the emulator locally.
  const storage = storageOrigin ?? 'https://*.amazonaws.com';
  return [
    "default-src 'self'",
    `connect-src 'self' ${cognito} ${storage}`,
    "img-src 'self' data: blob:",
    "style-src 'self'",
    "font-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
}

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

function fileResponse(file: ConsoleFile, cacheControl: string, extra: Record<string, string> = {}) {
  const text = file.contentType.startsWith('text/') || file.contentType.includes('javascript');
  return {
    statusCode: 200,
    headers: {
      'content-type': file.contentType,
      'cache-control': cacheControl,
      ...SECURITY_HEADERS,
      ...extra,
    },
    body: text ? file.body.toString('utf8') : file.body.toString('base64'),
    isBase64Encoded: !text,
  } satisfies APIGatewayProxyStructuredResultV2;
}

export function makeConsoleHandler(deps: {
  readonly files: ReadonlyMap<string, ConsoleFile>;
  readonly config: ConsoleConfig;
  /** Where presigned upload URLs point, when not at S3 in AWS (`npm start`'s S3 emulator). */
  readonly storageOrigin?: string;
}) {
  const csp = contentSecurityPolicy(deps.config, deps.storageOrigin);
  const route = (event: APIGatewayProxyEventV2): APIGatewayProxyStructuredResultV2 => {
    switch (event.routeKey) {
      case 'GET /':
        return { statusCode: 302, headers: { location: '/console', ...SECURITY_HEADERS }, body: '' };
      case 'GET /console': {
        const page = deps.files.get(CONSOLE_PAGE);
        if (!page) return jsonResponse(404, { message: 'the console is not built' });
        return fileResponse(page, 'no-cache', { 'content-security-policy': csp });
      }
      case 'GET /console/{file}': {
        const name = event.pathParameters?.file ?? '';
        if (name === 'config.json') {
          return {
            ...jsonResponse(200, deps.config),
            headers: { 'content-type': 'application/json', 'cache-control': 'no-cache', ...SECURITY_HEADERS },
          };
        }
        const file = name === CONSOLE_PAGE ? undefined : deps.files.get(name);
        if (!file) return jsonResponse(404, { message: 'Not Found' });
        // Every other file's name carries its content hash: it never changes under that name.
        return fileResponse(file, 'public, max-age=31536000, immutable');
      }
      default:
        return jsonResponse(404, { message: 'Not Found' });
    }
  };
  return middy(async (event: APIGatewayProxyEventV2) => route(event));
}
