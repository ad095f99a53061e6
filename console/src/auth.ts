/**
 * Sign-in with the Cognito user pool (USER_PASSWORD_AUTH over TLS to Cognito, or to `npm start`'s
 * emulator), through the SDK's own client. Tokens stay in this tab's sessionStorage; the access
 * token is renewed with the refresh token a minute before it expires.
 */
import {
  CognitoIdentityProviderClient,
  InitiateAuthCommand,
  RespondToAuthChallengeCommand,
} from '@aws-sdk/client-cognito-identity-provider';
import type { ConsoleConfig } from './config.ts';

interface StoredTokens {
  readonly accessToken: string;
  readonly refreshToken: string;
  readonly expiresAt: number;
  readonly username: string;
}

const STORAGE_KEY = 'switchboard.tokens';

export type SignInResult =
  | { readonly kind: 'signed-in' }
  | { readonly kind: 'new-password'; readonly session: string };

/** The sign-in's error in words for the page (Cognito's own message, which names no secret). */
export function signInProblem(error: unknown): string {
  const e = error as { name?: string; message?: string };
  if (e.name === 'NotAuthorizedException' || e.name === 'InvalidPasswordException')
    return e.message ?? e.name;
  if (e.name === 'TypeError') return 'Cannot reach the sign-in service. Check your connection and try again.';
  return e.message ?? 'Sign-in failed.';
}

export class Session {
  readonly #config: ConsoleConfig;
  readonly #cognito: CognitoIdentityProviderClient;
  #tokens: StoredTokens | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(config: ConsoleConfig) {
    this.#config = config;
    this.#cognito = new CognitoIdentityProviderClient({
      region: config.region,
      ...(config.cognitoEndpoint ? { endpoint: config.cognitoEndpoint } : {}),
      // Sign-in calls are not signed with AWS credentials: none are needed or looked for.
      credentials: { accessKeyId: 'unused', secretAccessKey: 'unused' },
    });
    const stored = sessionStorage.getItem(STORAGE_KEY);
    this.#tokens = stored ? (JSON.parse(stored) as StoredTokens) : undefined;
  }

  get username(): string | undefined {
    return this.#tokens?.username;
  }

  get signedIn(): boolean {
    return this.#tokens !== undefined;
  }

  async signIn(username: string, password: string): Promise<SignInResult> {
    const out = await this.#cognito.send(
      new InitiateAuthCommand({
        AuthFlow: 'USER_PASSWORD_AUTH',
        ClientId: this.#config.userPoolClientId,
        AuthParameters: { USERNAME: username, PASSWORD: password },
      }),
    );
    if (out.ChallengeName === 'NEW_PASSWORD_REQUIRED' && out.Session) {
      return { kind: 'new-password', session: out.Session };
    }
    this.#store(username, out.AuthenticationResult);
    return { kind: 'signed-in' };
  }

  async setNewPassword(username: string, newPassword: string, session: string): Promise<void> {
    const out = await this.#cognito.send(
      new RespondToAuthChallengeCommand({
        ChallengeName: 'NEW_PASSWORD_REQUIRED',
        ClientId: this.#config.userPoolClientId,
        Session: session,
        ChallengeResponses: { USERNAME: username, NEW_PASSWORD: newPassword },
      }),
    );
    this.#store(username, out.AuthenticationResult);
  }

  signOut(): void {
    this.#tokens = undefined;
    sessionStorage.removeItem(STORAGE_KEY);
  }

  /** A valid access token, renewed if it is about to expire; undefined when signed out. */
  async accessToken(): Promise<string | undefined> {
    const tokens = this.#tokens;
    if (!tokens) return undefined;
    if (tokens.expiresAt - Date.now() < 60_000) {
      this.#refreshing ??= this.#refresh(tokens).finally(() => {
        this.#refreshing = undefined;
      });
      await this.#refreshing;
    }
    return this.#tokens?.accessToken;
  }

  async #refresh(tokens: StoredTokens): Promise<void> {
    try {
      const out = await this.#cognito.send(
        new InitiateAuthCommand({
          AuthFlow: 'REFRESH_TOKEN_AUTH',
          ClientId: this.#config.userPoolClientId,
          AuthParameters: { REFRESH_TOKEN: tokens.refreshToken },
        }),
      );
      this.#store(tokens.username, { ...out.AuthenticationResult, RefreshToken: tokens.refreshToken });
    } catch (error) {
      if ((error as { name?: string }).name === 'NotAuthorizedException') this.signOut();
      else throw error;
    }
  }

  #store(
    username: string,
    result: { AccessToken?: string; RefreshToken?: string; ExpiresIn?: number } | undefined,
  ): void {
    if (!result?.AccessToken || !result.RefreshToken) throw new Error('the sign-in answered no token');
    this.#tokens = {
      accessToken: result.AccessToken,
      refreshToken: result.RefreshToken,
      expiresAt: Date.now() + (result.ExpiresIn ?? 3600) * 1000,
      username,
    };
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(this.#tokens));
  }
}
