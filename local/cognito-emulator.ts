/**
 * The Amazon Cognito user pool emulator: the console signs in against it exactly as it does
 * against Cognito in AWS, through the user pool API's JSON protocol (`POST /` with
 * `X-Amz-Target: AWSCognitoIdentityProviderService.InitiateAuth`), so the console's real SDK
 * client runs unchanged. It issues RS256 tokens with Cognito's claims (`cognito:groups`,
 * `token_use`, `client_id`...) and publishes its keys where Cognito does
 * (`/{userPoolId}/.well-known/jwks.json`, found through `openid-configuration`), which is what
 * the API Gateway stand-in's JWT authorizer fetches to verify them.
 *
 * Kept from Cognito (Cognito developer guide, "InitiateAuth", "RespondToAuthChallenge", "Using
 * tokens"): the USER_PASSWORD_AUTH and REFRESH_TOKEN_AUTH flows; one answer,
 * `NotAuthorizedException: Incorrect username or password.`, for a wrong password and an unknown
 * user (PreventUserExistenceErrors); the NEW_PASSWORD_REQUIRED challenge of a user created with a
 * temporary password, and the pool's password policy on the new one; tokens valid one hour;
 * CORS, as the browser calls Cognito from the console's origin.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { LocalCloudError } from './errors.ts';

/** A user of the pool. */
export interface PoolUser {
  readonly username: string;
  readonly password: string;
  readonly groups: readonly string[];
  readonly email?: string;
  /** Created by an administrator with a temporary password: the first sign-in must set a new one. */
  readonly mustChangePassword?: boolean;
}

export interface CognitoEmulatorOptions {
  readonly region: string;
  readonly userPoolId: string;
  readonly clientId: string;
  readonly users?: readonly PoolUser[];
  /** Lifetime of access and ID tokens (Cognito's default: one hour). */
  readonly tokenSeconds?: number;
  readonly port?: number;
  readonly now?: () => number;
}

/** What a successful sign-in answers (`AuthenticationResult`). */
export interface PoolTokens {
  readonly AccessToken: string;
  readonly IdToken: string;
  readonly RefreshToken?: string;
  readonly ExpiresIn: number;
  readonly TokenType: 'Bearer';
}

export interface CognitoEmulator {
  /** The endpoint the SDK client is pointed at (`endpoint`). */
  readonly url: string;
  /** The issuer of its tokens, as Cognito's `https://cognito-idp.{region}.amazonaws.com/{userPoolId}`. */
  readonly issuer: string;
  readonly userPoolId: string;
  readonly clientId: string;
  readonly region: string;
  /** Adds or replaces a user (an administrator's AdminCreateUser + AdminAddUserToGroup). */
  putUser(user: PoolUser): void;
  /**
   * Tokens for a user without a password, issued at `issuedAt` (tests: a token that has expired,
   * without waiting an hour).
   */
  issueTokens(username: string, options?: { readonly issuedAt?: number }): Promise<PoolTokens>;
  stop(): Promise<void>;
}

/** The pool's password policy (as the stack's user pool sets it). */
export const PASSWORD_POLICY = { minLength: 12, lowercase: true, uppercase: true, digits: true };

class CognitoError extends LocalCloudError {
  readonly type: string;
  constructor(type: string, message: string) {
    super(message);
    this.type = type;
  }
}

const INCORRECT = () => new CognitoError('NotAuthorizedException', 'Incorrect username or password.');

/** Why a new password does not meet the pool's policy, in Cognito's words, or undefined. */
export function passwordPolicyProblem(password: string): string | undefined {
  const missing: string[] = [];
  if (password.length < PASSWORD_POLICY.minLength) missing.push('Password not long enough');
  if (!/[a-z]/.test(password)) missing.push('Password must have lowercase characters');
  if (!/[A-Z]/.test(password)) missing.push('Password must have uppercase characters');
  if (!/[0-9]/.test(password)) missing.push('Password must have numeric characters');
  return missing.length > 0 ? `Password does not conform to policy: ${missing[0]}` : undefined;
}

interface Keys {
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

/** The user pool: its users, sessions and refresh tokens, and the tokens it signs. */
class UserPool {
  readonly #options: CognitoEmulatorOptions;
  readonly #keys: Keys;
  readonly #users = new Map<string, PoolUser>();
  /** Challenge sessions (NEW_PASSWORD_REQUIRED) by session string: the user they are for. */
  readonly #sessions = new Map<string, string>();
  readonly #refreshTokens = new Map<string, string>();
  issuer = '';

  constructor(options: CognitoEmulatorOptions, keys: Keys) {
    this.#options = options;
    this.#keys = keys;
    for (const user of options.users ?? []) this.putUser(user);
  }

  get jwks() {
    return { keys: [this.#keys.jwk] };
  }

  putUser(user: PoolUser): void {
    this.#users.set(user.username, user);
  }

  async initiateAuth(input: Record<string, unknown>) {
    this.#checkClient(input.ClientId);
    const params = (input.AuthParameters ?? {}) as Record<string, string>;
    if (input.AuthFlow === 'USER_PASSWORD_AUTH') {
      const user = this.#users.get(params.USERNAME ?? '');
      if (!user || user.password !== params.PASSWORD) throw INCORRECT();
      if (user.mustChangePassword) return this.#newPasswordChallenge(user);
      return { AuthenticationResult: await this.tokens(user), ChallengeParameters: {} };
    }
    if (input.AuthFlow === 'REFRESH_TOKEN_AUTH' || input.AuthFlow === 'REFRESH_TOKEN') {
      const username = this.#refreshTokens.get(params.REFRESH_TOKEN ?? '');
      const user = username === undefined ? undefined : this.#users.get(username);
      if (!user) throw new CognitoError('NotAuthorizedException', 'Invalid Refresh Token');
      const { RefreshToken: _kept, ...result } = await this.tokens(user);
      return { AuthenticationResult: result, ChallengeParameters: {} };
    }
    throw new CognitoError(
      'InvalidParameterException',
      `${String(input.AuthFlow)} flow not enabled for this client`,
    );
  }

  async respondToAuthChallenge(input: Record<string, unknown>) {
    this.#checkClient(input.ClientId);
    const responses = (input.ChallengeResponses ?? {}) as Record<string, string>;
    const username = this.#sessions.get(String(input.Session ?? ''));
    if (input.ChallengeName !== 'NEW_PASSWORD_REQUIRED' || username === undefined) {
      throw new CognitoError('NotAuthorizedException', 'Invalid session for the user, session is expired.');
    }
    const user = this.#users.get(username);
    if (!user || responses.USERNAME !== username) throw INCORRECT();
    const problem = passwordPolicyProblem(responses.NEW_PASSWORD ?? '');
    if (problem) throw new CognitoError('InvalidPasswordException', problem);
    this.#sessions.delete(String(input.Session));
    const changed: PoolUser = { ...user, password: responses.NEW_PASSWORD!, mustChangePassword: false };
    this.#users.set(username, changed);
    return { AuthenticationResult: await this.tokens(changed), ChallengeParameters: {} };
  }

  /** Access, ID and refresh tokens for `user`, as Cognito writes their claims. */
  async tokens(user: PoolUser, issuedAt = (this.#options.now ?? Date.now)()): Promise<PoolTokens> {
    const seconds = this.#options.tokenSeconds ?? 3600;
    const iat = Math.floor(issuedAt / 1000);
    const sub = subjectOf(user.username);
    const common = {
      sub,
      ...(user.groups.length > 0 ? { 'cognito:groups': [...user.groups] } : {}),
      origin_jti: randomUUID(),
      event_id: randomUUID(),
      auth_time: iat,
    };
    const sign = (claims: Record<string, unknown>) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: this.#keys.jwk.kid! })
        .setIssuer(this.issuer)
        .setIssuedAt(iat)
        .setExpirationTime(iat + seconds)
        .setJti(randomUUID())
        .sign(this.#keys.privateKey);
    const refresh = randomBytes(48).toString('base64url');
    this.#refreshTokens.set(refresh, user.username);
    return {
      AccessToken: await sign({
        ...common,
        token_use: 'access',
        scope: 'aws.cognito.signin.user.admin',
        client_id: this.#options.clientId,
        username: user.username,
      }),
      IdToken: await sign({
        ...common,
        token_use: 'id',
        aud: this.#options.clientId,
        'cognito:username': user.username,
        ...(user.email ? { email: user.email, email_verified: true } : {}),
      }),
      RefreshToken: refresh,
      ExpiresIn: seconds,
      TokenType: 'Bearer',
    };
  }

  user(username: string): PoolUser | undefined {
    return this.#users.get(username);
  }

  #newPasswordChallenge(user: PoolUser) {
    const session = randomBytes(32).toString('base64url');
    this.#sessions.set(session, user.username);
    return {
      ChallengeName: 'NEW_PASSWORD_REQUIRED',
      Session: session,
      ChallengeParameters: {
        USER_ID_FOR_SRP: user.username,
        requiredAttributes: '[]',
        userAttributes: JSON.stringify(user.email ? { email: user.email } : {}),
      },
    };
  }

  #checkClient(clientId: unknown): void {
    if (clientId !== this.#options.clientId) {
      throw new CognitoError(
        'ResourceNotFoundException',
        `User pool client ${String(clientId)} does not exist.`,
      );
    }
  }
}

/** A stable `sub` per user name (Cognito's is a UUID fixed at creation). */
function subjectOf(username: string): string {
  const hex = Buffer.from(username).toString('hex').padEnd(32, '0').slice(0, 32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers':
    'content-type, x-amz-target, x-amz-user-agent, amz-sdk-invocation-id, amz-sdk-request, authorization, cache-control',
  'access-control-expose-headers': 'x-amzn-requestid, x-amzn-errortype, x-amzn-errormessage, date',
  'access-control-max-age': '86400',
};

/** Starts the emulator on 127.0.0.1 (a free port unless one is given). */
export async function startCognitoEmulator(options: CognitoEmulatorOptions): Promise<CognitoEmulator> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: randomUUID(), alg: 'RS256', use: 'sig' };
  const pool = new UserPool(options, { privateKey, jwk });
  const server = http.createServer((req, res) => {
    void answer(req, pool, options).then(({ status, body, headers }) => {
      const text = JSON.stringify(body);
      res.writeHead(status, {
        ...CORS_HEADERS,
        'content-type': 'application/x-amz-json-1.1',
        'x-amzn-requestid': randomUUID(),
        'content-length': String(Buffer.byteLength(text)),
        ...headers,
      });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  pool.issuer = `${url}/${options.userPoolId}`;
  return {
    url,
    issuer: pool.issuer,
    userPoolId: options.userPoolId,
    clientId: options.clientId,
    region: options.region,
    putUser: (user) => pool.putUser(user),
    issueTokens: async (username, issue = {}) => {
      const user = pool.user(username);
      if (!user) throw new Error(`no user ${username} in the pool`);
      return pool.tokens(user, issue.issuedAt);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

async function answer(
  req: http.IncomingMessage,
  pool: UserPool,
  options: CognitoEmulatorOptions,
): Promise<Answer> {
  const path = (req.url ?? '/').split('?')[0]!;
  if (req.method === 'OPTIONS') return { status: 204, body: '' };
  if (req.method === 'GET' && path === `/${options.userPoolId}/.well-known/jwks.json`) {
    return { status: 200, body: pool.jwks, headers: { 'content-type': 'application/json' } };
  }
  if (req.method === 'GET' && path === `/${options.userPoolId}/.well-known/openid-configuration`) {
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: {
        issuer: pool.issuer,
        jwks_uri: `${pool.issuer}/.well-known/jwks.json`,
        id_token_signing_alg_values_supported: ['RS256'],
        subject_types_supported: ['public'],
        response_types_supported: ['code', 'token'],
      },
    };
  }
  if (req.method !== 'POST' || path !== '/') return { status: 404, body: { message: 'Not Found' } };
  const target = String(req.headers['x-amz-target'] ?? '');
  const body = await readJson(req);
  try {
    switch (target) {
      case 'AWSCognitoIdentityProviderService.InitiateAuth':
        return { status: 200, body: await pool.initiateAuth(body) };
      case 'AWSCognitoIdentityProviderService.RespondToAuthChallenge':
        return { status: 200, body: await pool.respondToAuthChallenge(body) };
      default:
        throw new CognitoError(
          'UnknownOperationException',
          `the emulator does not implement ${target || 'this call'}`,
        );
    }
  } catch (error) {
    if (!(error instanceof CognitoError)) throw error;
    return {
      status: 400,
      body: { __type: error.type, message: error.message },
      headers: { 'x-amzn-errortype': `${error.type}:` },
    };
  }
}

async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as unknown;
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
