/**
 * The HTTP API's JWT authorizer, as the API Gateway stand-in runs it on `auth: 'jwt'` routes.
 * It checks what API Gateway checks (developer guide, "Controlling access to HTTP APIs with JWT
 * authorizers"): a token in the `Authorization` header (with or without `Bearer `), its `kid`
 * among the issuer's keys (found through `{issuer}/.well-known/openid-configuration`), RS256,
 * `iss` equal to the configured issuer, `aud` or `client_id` among the configured audiences, and
 * `exp`, `nbf`, `iat` against the clock. A token that fails any of it is a 401 before the Lambda
 * runs. The integration receives the claims as strings, an array as `[a b]`, as API Gateway
 * writes them.
 */
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from 'jose';

export interface JwtAuthorizerConfig {
  /** The user pool's issuer URL. */
  readonly issuer: string;
  /** The app client ids accepted in `aud` (ID tokens) or `client_id` (access tokens). */
  readonly audience: readonly string[];
  readonly now?: () => number;
}

/** What the integration sees in `requestContext.authorizer`. */
export interface JwtAuthorization {
  readonly jwt: { readonly claims: Record<string, string>; readonly scopes: readonly string[] | null };
}

/** Why a request was refused: API Gateway's 401 and its `www-authenticate` header. */
export interface JwtRefusal {
  readonly status: 401;
  readonly wwwAuthenticate: string;
}

export type JwtDecision = { readonly authorizer: JwtAuthorization } | { readonly refusal: JwtRefusal };

function refuse(description: string): { refusal: JwtRefusal } {
  return {
    refusal: {
      status: 401,
      wwwAuthenticate: `Bearer scope="" error="invalid_token" error_description="${description}"`,
    },
  };
}

/** A claim as API Gateway hands it to the integration: always a string. */
export function claimAsString(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(String).join(' ')}]`;
  if (typeof value === 'object' && value !== null) return JSON.stringify(value);
  return String(value);
}

/** The authorizer of one API: its keys are fetched once and refreshed when a new `kid` appears. */
export function makeJwtAuthorizer(config: JwtAuthorizerConfig) {
  let keys: ReturnType<typeof createRemoteJWKSet> | undefined;
  const keySet = async () => {
    if (keys) return keys;
    const discovery = await fetch(`${config.issuer}/.well-known/openid-configuration`);
    if (!discovery.ok) throw new Error(`the issuer's openid-configuration answered ${discovery.status}`);
    const { jwks_uri: jwksUri } = (await discovery.json()) as { jwks_uri?: string };
    if (!jwksUri) throw new Error("the issuer's openid-configuration has no jwks_uri");
    keys = createRemoteJWKSet(new URL(jwksUri));
    return keys;
  };

  return async function authorize(authorization: string | undefined): Promise<JwtDecision> {
    if (!authorization?.trim()) return refuse('no token');
    const token = authorization.trim().replace(/^Bearer\s+/i, '');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await keySet(), {
        issuer: config.issuer,
        algorithms: ['RS256'],
        ...(config.now ? { currentDate: new Date(config.now()) } : {}),
      }));
    } catch (error) {
      if (error instanceof errors.JWTExpired) return refuse('the token has expired');
      if (error instanceof errors.JOSEError) return refuse('the token could not be verified');
      throw error;
    }
    const audiences = [payload.aud, payload.client_id].flat().filter((a) => typeof a === 'string');
    if (!audiences.some((a) => config.audience.includes(a))) return refuse('the token is not for this API');
    const claims = Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, claimAsString(v)]));
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : null;
    return { authorizer: { jwt: { claims, scopes } } };
  };
}
