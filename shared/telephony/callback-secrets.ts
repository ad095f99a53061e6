/**
 * The telephony provider's callback secret, kept like LINE channel secrets: in the channels table,
 * under its own KMS key, read at run time (never a function's environment, where a deploy freezes
 * it and `GetFunctionConfiguration` shows it). A new secret replaces the current one, which keeps
 * verifying callbacks for a grace period (default 24 h), so a rotation refuses none. The call-status
 * function reads it through {@link CachedCallbackSecrets}: a rotation takes effect within its TTL.
 */
import type { Clock } from '#shared/pacing/clock.ts';
import { TelephonyError } from './errors.ts';

export const DEFAULT_CALLBACK_SECRET_GRACE_MS = 24 * 3600 * 1000;

/**
 * The key prefix of callback secret items in the channels table (`TELEPHONY#{provider}`): no LINE
 * channel id has it, so the call-status role's read can be narrowed to these items.
 */
export const CALLBACK_SECRET_KEY_PREFIX = 'TELEPHONY#';

export interface CallbackSecretRecord {
  /** The provider name of the status route (`/providers/{provider}/calls/status`). */
  readonly provider: string;
  readonly current: string;
  readonly previous?: string;
  /** Until when (epoch ms) `previous` still verifies. */
  readonly previousValidUntil?: number;
  readonly updatedAt: number;
}

export interface CallbackSecretStore {
  get(provider: string): Promise<CallbackSecretRecord | undefined>;
  put(record: CallbackSecretRecord): Promise<void>;
}

export class InvalidCallbackSecretError extends TelephonyError {}

/** No secret has been set for the provider: callbacks cannot be verified (the operator must set one). */
export class CallbackSecretNotSetError extends TelephonyError {}

/**
 * The record after setting `secret`: it verifies from now on; the one it replaces until
 * `now + graceMs` (0: at once).
 */
export function rotateCallbackSecret(
  existing: CallbackSecretRecord | undefined,
  input: { provider: string; secret: string; now: number; graceMs?: number },
): CallbackSecretRecord {
  const { provider, secret, now } = input;
  if (!/^[a-z0-9-]{1,40}$/.test(provider) && !/^client\/[A-Za-z0-9_-]{1,64}$/.test(provider)) {
    throw new InvalidCallbackSecretError('provider: lower-case letters, digits and "-", 1 to 40 characters');
  }
  if (secret.length < 16 || secret.length > 512 || /\s/.test(secret)) {
    throw new InvalidCallbackSecretError('secret: 16 to 512 characters, no spaces');
  }
  const graceMs = input.graceMs ?? DEFAULT_CALLBACK_SECRET_GRACE_MS;
  if (!existing || existing.current === secret || graceMs <= 0) {
    return { provider, current: secret, updatedAt: now };
  }
  return {
    provider,
    current: secret,
    previous: existing.current,
    previousValidUntil: now + graceMs,
    updatedAt: now,
  };
}

/** The secrets that verify a callback at `now`: the current one, and the previous within its grace. */
export function verifyingSecrets(record: CallbackSecretRecord, now: number): string[] {
  const previousValid = record.previous !== undefined && (record.previousValidUntil ?? 0) > now;
  return previousValid ? [record.current, record.previous!] : [record.current];
}

/** The record without its secrets, for `show` and logs. */
export function redactCallbackSecret(record: CallbackSecretRecord) {
  return {
    provider: record.provider,
    current: '********',
    ...(record.previous === undefined
      ? {}
      : { previous: '********', previousValidUntil: record.previousValidUntil }),
    updatedAt: record.updatedAt,
  };
}

/** The provider's verifying secrets, read from the store at most once per `ttlMs`. */
export class CachedCallbackSecrets {
  readonly #store: CallbackSecretStore;
  readonly #provider: string;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  #record: CallbackSecretRecord | undefined;
  #readAt = Number.NEGATIVE_INFINITY;

  constructor(options: { store: CallbackSecretStore; provider: string; clock: Clock; ttlMs?: number }) {
    this.#store = options.store;
    this.#provider = options.provider;
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs ?? 60_000;
  }

  /** Throws {@link CallbackSecretNotSetError} when the provider has no secret. */
  async secrets(): Promise<string[]> {
    const now = this.#clock.now();
    // A missing secret is remembered for the TTL too: a client without one costs one read a minute,
    // not one per call (a secret set meanwhile is seen within the TTL, as a rotation is).
    if (now - this.#readAt >= this.#ttlMs) {
      this.#record = await this.#store.get(this.#provider);
      this.#readAt = now;
    }
    if (!this.#record) {
      const client = /^client\/(.+)$/.exec(this.#provider)?.[1];
      throw new CallbackSecretNotSetError(
        client === undefined
          ? `no callback secret is set for provider "${this.#provider}": set it with \`npm run channel -- put-callback-secret --provider ${this.#provider} --secret -\``
          : `no telephony secret is set for client "${client}": set it with \`npm run channel -- put-telephony-secret --client ${client} --secret -\``,
      );
    }
    return verifyingSecrets(this.#record, now);
  }
}

/**
 * The record name of one client's own telephony secret (its Twilio auth token, or the bearer
 * token of its HTTP provider): kept beside the callback secrets, under the same prefix and key.
 */
export function clientSecretName(clientId: string): string {
  return `client/${clientId}`;
}

/**
 * Each client's telephony secret, read from the store at most once per `ttlMs` per client: the
 * broker authenticates with the current one, the call-status route verifies with the current one
 * and, during a rotation's grace, the previous one.
 */
export class ClientTelephonySecrets {
  readonly #options: { store: CallbackSecretStore; clock: Clock; ttlMs?: number };
  readonly #byClient = new Map<string, CachedCallbackSecrets>();

  constructor(options: { store: CallbackSecretStore; clock: Clock; ttlMs?: number }) {
    this.#options = options;
  }

  #cache(clientId: string): CachedCallbackSecrets {
    let cache = this.#byClient.get(clientId);
    if (!cache) {
      // A broker serves a bounded set of clients; this only keeps a lookup of a stranger from growing it.
      if (this.#byClient.size >= 10_000) this.#byClient.clear();
      cache = new CachedCallbackSecrets({ ...this.#options, provider: clientSecretName(clientId) });
      this.#byClient.set(clientId, cache);
    }
    return cache;
  }

  /** The client's secrets in force, current first; throws {@link CallbackSecretNotSetError} when none is set. */
  verifying(clientId: string): Promise<string[]> {
    return this.#cache(clientId).secrets();
  }

  /** The current secret, or undefined when the client has none. */
  async current(clientId: string): Promise<string | undefined> {
    try {
      return (await this.verifying(clientId))[0];
    } catch (error) {
      if (error instanceof CallbackSecretNotSetError) return undefined;
      throw error;
    }
  }
}
