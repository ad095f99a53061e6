/**
 * The one-click unsubscribe keys (`shared/email/unsubscribe.ts`), kept in one Secrets Manager
 * secret that the unsubscribe function (which verifies) and the brokers (which sign) both read, and
 * the settings both take from their environment.
 *
 * The secret is a JSON object: `current` names the key new tokens are signed with, and every other
 * property is a key by its id (1 to 16 of `A-Za-z0-9_-`, at least 32 bytes of UTF-8 each):
 *
 *     {"current": "k2", "k2": "…64 random characters…", "k1": "…the key before…"}
 *
 * The stack creates it with one generated key (`k1`). To rotate: add a new key and make it
 * `current` (`aws secretsmanager put-secret-value`); keep the old one as long as links signed with
 * it must work (CAN-SPAM asks 30 days at least; links do not expire otherwise); drop it to retire
 * those links. A verifier that meets a key id it does not know reads the secret again (at most once
 * a minute), so a warm function accepts links from brokers that read the new key before it did.
 */
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  type UnsubscribeSecret,
  UnsubscribeTokens,
  type UnsubscribeVerdict,
} from '#shared/email/unsubscribe.ts';
import { AdapterError } from './errors.ts';

/** The ARN of the keys' secret (AWS). */
export const UNSUBSCRIBE_SECRET_ARN_ENV = 'UNSUBSCRIBE_SECRET_ARN';
/** The keys document itself, in place of the secret: set on the local cloud only, never in AWS. */
export const UNSUBSCRIBE_KEYS_ENV = 'UNSUBSCRIBE_KEYS';
/** Where links point, without the token: `https://{api}/unsubscribe` (the signer's setting). */
export const UNSUBSCRIBE_BASE_URL_ENV = 'UNSUBSCRIBE_BASE_URL';
/** The property of the keys document that names the key new tokens are signed with. */
export const CURRENT_KEY_FIELD = 'current';
/** The least time between two reads of the secret caused by an unknown key id. */
export const KEY_REFRESH_INTERVAL_MS = 60_000;

/** The keys document is missing or not what the module comment describes. Never quotes a key. */
export class UnsubscribeKeysError extends AdapterError {}

export interface UnsubscribeKeysOptions {
  /** Epoch ms now (the tokens' `issuedAt`); default `Date.now`. */
  readonly clock?: { now(): number };
}

/**
 * The signer and verifier that a keys document describes. Throws {@link UnsubscribeKeysError}
 * when the document is not JSON, names no current key, or holds a key that is not a string of at
 * least 32 bytes under a valid id.
 */
export function unsubscribeTokensFrom(
  document: string,
  options: UnsubscribeKeysOptions = {},
): UnsubscribeTokens {
  let parsed: unknown;
  try {
    parsed = JSON.parse(document);
  } catch {
    // No cause: JSON.parse's message quotes the text it could not read, here the secret.
    throw new UnsubscribeKeysError('the unsubscribe keys are not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UnsubscribeKeysError('the unsubscribe keys are not a JSON object');
  const { [CURRENT_KEY_FIELD]: kid, ...keys } = parsed as Record<string, unknown>;
  if (typeof kid !== 'string' || kid === '')
    throw new UnsubscribeKeysError(`the unsubscribe keys name no "${CURRENT_KEY_FIELD}" key id`);
  for (const [id, value] of Object.entries(keys))
    if (typeof value !== 'string')
      throw new UnsubscribeKeysError(`the unsubscribe key ${id} is not a string`);
  const secrets = keys as Record<string, UnsubscribeSecret>;
  const secret = secrets[kid];
  if (secret === undefined)
    throw new UnsubscribeKeysError(`the current unsubscribe key ${JSON.stringify(kid)} is not in the keys`);
  const { [kid]: _current, ...retiredKeys } = secrets;
  const clock = options.clock;
  try {
    return new UnsubscribeTokens(secret, {
      kid,
      retiredKeys,
      ...(clock ? { clock: () => clock.now() } : {}),
    });
  } catch (error) {
    // UnsubscribeTokens names the key id and its length, never the key.
    throw new UnsubscribeKeysError((error as Error).message, { cause: error });
  }
}

/** The keys document of the secret's current version (`AWSCURRENT`). */
export async function readUnsubscribeKeys(client: SecretsManagerClient, secretId: string): Promise<string> {
  const out = await client.send(new GetSecretValueCommand({ SecretId: secretId }));
  if (out.SecretString === undefined)
    throw new UnsubscribeKeysError('the unsubscribe keys secret holds no string (SecretString)');
  return out.SecretString;
}

/** The link of one token: the base URL (`UNSUBSCRIBE_BASE_URL`) and the token as its last segment. */
export function unsubscribeUrl(baseUrl: string, token: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${token}`;
}

/**
 * The keys as a long-lived process holds them: read on first use and kept, read again when a token
 * names a key id they do not hold (a rotation this process has not seen), at most once per
 * {@link KEY_REFRESH_INTERVAL_MS}, so forged key ids cannot make it hammer Secrets Manager.
 *
 * @example
 * const keyring = UnsubscribeKeyring.fromEnvironment(process.env, () => makeSecretsManagerClient());
 * const verdict = await keyring.verify(token); // { ok: true, unsubscribe } | { ok: false, reason }
 */
export class UnsubscribeKeyring {
  readonly #read: () => Promise<string>;
  readonly #options: UnsubscribeKeysOptions;
  readonly #now: () => number;
  readonly #refreshIntervalMs: number;
  #tokens: Promise<UnsubscribeTokens> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;

  constructor(
    read: () => Promise<string>,
    options: UnsubscribeKeysOptions & { readonly refreshIntervalMs?: number } = {},
  ) {
    this.#read = read;
    this.#options = options.clock ? { clock: options.clock } : {};
    this.#now = options.clock ? () => options.clock!.now() : Date.now;
    this.#refreshIntervalMs = options.refreshIntervalMs ?? KEY_REFRESH_INTERVAL_MS;
  }

  /**
   * The keys of the environment: the document itself when {@link UNSUBSCRIBE_KEYS_ENV} is set (the
   * local cloud), else the secret {@link UNSUBSCRIBE_SECRET_ARN_ENV} names, read with the client
   * `makeClient` builds (built only then). Throws {@link UnsubscribeKeysError} when neither is set.
   */
  static fromEnvironment(
    env: NodeJS.ProcessEnv,
    makeClient: () => SecretsManagerClient,
    options: UnsubscribeKeysOptions = {},
  ): UnsubscribeKeyring {
    const document = env[UNSUBSCRIBE_KEYS_ENV];
    if (document) return new UnsubscribeKeyring(async () => document, options);
    const secretId = env[UNSUBSCRIBE_SECRET_ARN_ENV];
    if (!secretId)
      throw new UnsubscribeKeysError(
        `missing required environment variable ${UNSUBSCRIBE_SECRET_ARN_ENV} (or, on the local cloud, ${UNSUBSCRIBE_KEYS_ENV})`,
      );
    const client = makeClient();
    return new UnsubscribeKeyring(() => readUnsubscribeKeys(client, secretId), options);
  }

  /** The signer and verifier of the keys last read (reading them first if never read, or if that failed). */
  tokens(): Promise<UnsubscribeTokens> {
    if (!this.#tokens) this.#tokens = this.#load();
    return this.#tokens;
  }

  /** {@link UnsubscribeTokens.verify}, with the keys read again once for an unknown key id. */
  async verify(token: unknown): Promise<UnsubscribeVerdict> {
    const verdict = (await this.tokens()).verify(token);
    if (verdict.ok || verdict.reason !== 'unknown-key') return verdict;
    if (this.#now() - this.#readAt < this.#refreshIntervalMs) return verdict;
    this.#tokens = this.#load();
    return (await this.#tokens).verify(token);
  }

  #load(): Promise<UnsubscribeTokens> {
    this.#readAt = this.#now();
    const loading = this.#read().then((document) => unsubscribeTokensFrom(document, this.#options));
    // A failed read is not kept: the next request tries again.
    loading.catch(() => {
      if (this.#tokens === loading) this.#tokens = undefined;
    });
    return loading;
  }
}
