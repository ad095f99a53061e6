import { describe, expect, it } from 'vitest';
import {
  CachedCallbackSecrets,
  CallbackSecretNotSetError,
  type CallbackSecretRecord,
  InvalidCallbackSecretError,
  redactCallbackSecret,
  rotateCallbackSecret,
  verifyingSecrets,
} from '#shared/telephony/callback-secrets.ts';

const HOUR = 3600_000;
const OLD = 'old-secret-0123456789';
const NEW = 'new-secret-0123456789';

describe('rotating the callback secret', () => {
  it('keeps the previous secret verifying for the grace period, then only the new one', () => {
    const first = rotateCallbackSecret(undefined, { provider: 'default', secret: OLD, now: 0 });
    const second = rotateCallbackSecret(first, { provider: 'default', secret: NEW, now: HOUR });
    expect(verifyingSecrets(second, 2 * HOUR)).toEqual([NEW, OLD]);
    expect(verifyingSecrets(second, 25 * HOUR + 1)).toEqual([NEW]);
    expect(
      verifyingSecrets(
        rotateCallbackSecret(first, { provider: 'default', secret: NEW, now: HOUR, graceMs: 0 }),
        HOUR,
      ),
    ).toEqual([NEW]);
  });

  it('refuses a short or spaced secret and an odd provider name, naming the field', () => {
    expect(() => rotateCallbackSecret(undefined, { provider: 'default', secret: 'short', now: 0 })).toThrow(
      /^secret:/,
    );
    expect(() =>
      rotateCallbackSecret(undefined, { provider: 'default', secret: 'has a space in it ok', now: 0 }),
    ).toThrow(InvalidCallbackSecretError);
    expect(() => rotateCallbackSecret(undefined, { provider: 'Bad/Name', secret: NEW, now: 0 })).toThrow(
      /^provider:/,
    );
  });

  it('never shows a secret when redacted', () => {
    const record = rotateCallbackSecret(
      rotateCallbackSecret(undefined, { provider: 'p', secret: OLD, now: 0 }),
      { provider: 'p', secret: NEW, now: 1 },
    );
    expect(JSON.stringify(redactCallbackSecret(record))).not.toMatch(/secret-0123/);
  });
});

describe('the call-status function reading it', () => {
  it('reads the store at most once per TTL, so a rotation takes effect within it', async () => {
    let now = 0;
    let record: CallbackSecretRecord | undefined = rotateCallbackSecret(undefined, {
      provider: 'default',
      secret: OLD,
      now,
    });
    let reads = 0;
    const secrets = new CachedCallbackSecrets({
      store: {
        get: async () => {
          reads++;
          return record;
        },
        put: async () => {},
      },
      provider: 'default',
      clock: { now: () => now },
      ttlMs: 60_000,
    });
    expect(await secrets.secrets()).toEqual([OLD]);
    record = rotateCallbackSecret(record, { provider: 'default', secret: NEW, now: 1_000, graceMs: 0 });
    now = 30_000;
    expect(await secrets.secrets()).toEqual([OLD]);
    now = 61_000;
    expect(await secrets.secrets()).toEqual([NEW]);
    expect(reads).toBe(2);
  });

  it('says how to set the secret when none is set (the handler answers 503, so the provider retries)', async () => {
    const secrets = new CachedCallbackSecrets({
      store: { get: async () => undefined, put: async () => {} },
      provider: 'default',
      clock: { now: () => 0 },
    });
    await expect(secrets.secrets()).rejects.toThrow(CallbackSecretNotSetError);
    await expect(secrets.secrets()).rejects.toThrow(/put-callback-secret --provider default/);
  });
});
