/**
 * The unsubscribe keys' adapter (`shared/adapters/unsubscribe-secret.ts`): the keys document, its
 * read from Secrets Manager (the real SDK client against a local server speaking Secrets Manager's
 * JSON 1.1 wire), and the keyring's cache and rotation.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it } from 'vitest';
import {
  readUnsubscribeKeys,
  UNSUBSCRIBE_KEYS_ENV,
  UNSUBSCRIBE_SECRET_ARN_ENV,
  UnsubscribeKeyring,
  UnsubscribeKeysError,
  unsubscribeTokensFrom,
  unsubscribeUrl,
} from '#shared/adapters/unsubscribe-secret.ts';
import { UnsubscribeTokens } from '#shared/email/unsubscribe.ts';

const K1 = 'first-unsubscribe-key-0123456789abcdef';
const K2 = 'second-unsubscribe-key-0123456789abcdef';
const REQUEST = { clientId: 'acme', jobId: 'job-1', address: 'taro@example.com' };
const ARN = 'arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:UnsubscribeKeys-AbCdEf';

describe('the keys document', () => {
  it('signs with the current key and verifies every key it lists', () => {
    const tokens = unsubscribeTokensFrom(JSON.stringify({ current: 'k2', k2: K2, k1: K1 }));
    const signed = tokens.sign(REQUEST);
    expect(signed.startsWith('k2.')).toBe(true);
    expect(tokens.verify(signed)).toMatchObject({ ok: true, unsubscribe: REQUEST });
    const old = new UnsubscribeTokens(K1, { kid: 'k1' }).sign(REQUEST);
    expect(tokens.verify(old)).toMatchObject({ ok: true });
    // A key dropped from the document no longer verifies its links.
    expect(unsubscribeTokensFrom(JSON.stringify({ current: 'k2', k2: K2 })).verify(old)).toEqual({
      ok: false,
      reason: 'unknown-key',
    });
  });

  it('uses the clock it is given for the tokens it signs', () => {
    const at = Date.parse('2025-06-02T09:00:00Z');
    const tokens = unsubscribeTokensFrom(JSON.stringify({ current: 'k1', k1: K1 }), {
      clock: { now: () => at },
    });
    expect(tokens.verify(tokens.sign(REQUEST))).toMatchObject({ ok: true, unsubscribe: { issuedAt: at } });
  });

  it.each([
    ['not JSON', 'k1=secret', /not JSON/],
    ['an array', JSON.stringify([K1]), /not a JSON object/],
    ['no current', JSON.stringify({ k1: K1 }), /name no "current"/],
    ['a current key that is not there', JSON.stringify({ current: 'k2', k1: K1 }), /"k2" is not in the keys/],
    ['a key that is not a string', JSON.stringify({ current: 'k1', k1: K1, k0: 42 }), /k0 is not a string/],
    ['a short key', JSON.stringify({ current: 'k1', k1: 'short-secret' }), /k1 is 12 bytes; at least 32/],
    ['a bad key id', JSON.stringify({ current: 'k 1', 'k 1': K1 }), /key id/],
  ])('refuses %s, without quoting a key', (_what, document, message) => {
    let thrown: unknown;
    try {
      unsubscribeTokensFrom(document);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UnsubscribeKeysError);
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).not.toContain(K1);
    expect((thrown as Error).message).not.toContain('short-secret');
  });

  it('makes a link of a base URL and a token, with or without a trailing slash', () => {
    expect(unsubscribeUrl('https://api.example.com/unsubscribe', 'k1.abc.def')).toBe(
      'https://api.example.com/unsubscribe/k1.abc.def',
    );
    expect(unsubscribeUrl('https://u.example.com/unsubscribe/', 'k1.abc.def')).toBe(
      'https://u.example.com/unsubscribe/k1.abc.def',
    );
  });
});

describe('reading the secret from Secrets Manager', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  /** Answers GetSecretValue as Secrets Manager does (AWS JSON 1.1), recording what was asked. */
  async function secretsManager(answer: Record<string, unknown>) {
    const asked: { target: string | undefined; body: Record<string, unknown> }[] = [];
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        asked.push({
          target: req.headers['x-amz-target'] as string | undefined,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
        });
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = new SecretsManagerClient({
      endpoint: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`,
      region: 'ap-northeast-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    return { client, asked };
  }

  it('reads the current version of the named secret (GetSecretValue) and builds the tokens', async () => {
    const document = JSON.stringify({ current: 'k1', k1: K1 });
    const { client, asked } = await secretsManager({ ARN, Name: 'UnsubscribeKeys', SecretString: document });
    const tokens = unsubscribeTokensFrom(await readUnsubscribeKeys(client, ARN));
    expect(tokens.sign(REQUEST).startsWith('k1.')).toBe(true);
    expect(asked).toEqual([{ target: 'secretsmanager.GetSecretValue', body: { SecretId: ARN } }]);
    client.destroy();
  });

  it('refuses a binary secret', async () => {
    const { client } = await secretsManager({ ARN, Name: 'UnsubscribeKeys', SecretBinary: 'AAAA' });
    await expect(readUnsubscribeKeys(client, ARN)).rejects.toBeInstanceOf(UnsubscribeKeysError);
    client.destroy();
  });
});

describe('the keyring', () => {
  /** A secret whose document can be changed (a rotation), counting its reads. */
  function rotatingSecret(document: Record<string, string>) {
    const secret = { document, reads: 0, fail: false };
    const read = async () => {
      secret.reads += 1;
      if (secret.fail) throw new Error('Secrets Manager is unavailable');
      return JSON.stringify(secret.document);
    };
    return { secret, read };
  }

  it('reads the secret once, however many links it verifies', async () => {
    const { secret, read } = rotatingSecret({ current: 'k1', k1: K1 });
    const keyring = new UnsubscribeKeyring(read);
    const token = (await keyring.tokens()).sign(REQUEST);
    for (let i = 0; i < 5; i++) expect((await keyring.verify(token)).ok).toBe(true);
    expect(secret.reads).toBe(1);
  });

  it('reads it again for a key id it does not know (a rotation it has not seen), at most once a minute', async () => {
    let now = 1_000_000;
    const clock = { now: () => now };
    const { secret, read } = rotatingSecret({ current: 'k1', k1: K1 });
    const keyring = new UnsubscribeKeyring(read, { clock });
    await keyring.tokens();
    // A broker started after the rotation signs with k2.
    secret.document = { current: 'k2', k2: K2, k1: K1 };
    const fresh = new UnsubscribeTokens(K2, { kid: 'k2' }).sign(REQUEST);
    now += 61_000;
    expect((await keyring.verify(fresh)).ok).toBe(true);
    expect(secret.reads).toBe(2);
    // Forged key ids do not make it read again and again.
    const forged = new UnsubscribeTokens(K2, { kid: 'k9' }).sign(REQUEST);
    for (let i = 0; i < 10; i++)
      expect(await keyring.verify(forged)).toEqual({ ok: false, reason: 'unknown-key' });
    expect(secret.reads).toBe(2);
    now += 60_000;
    await keyring.verify(forged);
    expect(secret.reads).toBe(3);
    // A forged MAC under a known key is never a reason to read.
    expect((await keyring.verify(`${fresh.slice(0, -2)}AA`)).ok).toBe(false);
    expect(secret.reads).toBe(3);
  });

  it('does not keep a failed read: the next request tries again', async () => {
    const { secret, read } = rotatingSecret({ current: 'k1', k1: K1 });
    secret.fail = true;
    const keyring = new UnsubscribeKeyring(read);
    await expect(keyring.tokens()).rejects.toThrow('unavailable');
    secret.fail = false;
    expect((await keyring.tokens()).sign(REQUEST).startsWith('k1.')).toBe(true);
    expect(secret.reads).toBe(2);
  });

  it('from the environment: the document itself (local cloud, no client built), the secret by ARN, or neither', async () => {
    let built = 0;
    const makeClient = () => {
      built += 1;
      return new SecretsManagerClient({ region: 'ap-northeast-1' });
    };
    const local = UnsubscribeKeyring.fromEnvironment(
      { [UNSUBSCRIBE_KEYS_ENV]: JSON.stringify({ current: 'k1', k1: K1 }) },
      makeClient,
    );
    expect((await local.tokens()).sign(REQUEST).startsWith('k1.')).toBe(true);
    expect(built).toBe(0);
    UnsubscribeKeyring.fromEnvironment({ [UNSUBSCRIBE_SECRET_ARN_ENV]: ARN }, makeClient);
    expect(built).toBe(1);
    expect(() => UnsubscribeKeyring.fromEnvironment({}, makeClient)).toThrow(
      /missing required environment variable UNSUBSCRIBE_SECRET_ARN/,
    );
  });
});
