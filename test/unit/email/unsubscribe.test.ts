import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isOneClickUnsubscribeBody,
  listUnsubscribeHeaders,
  MAX_TOKEN_CHARS,
  UnsubscribeTokens,
} from '#shared/email/unsubscribe.ts';

const SECRET = 'k'.repeat(32);
const OLD_SECRET = Buffer.alloc(48, 7);
const request = { clientId: 'client-1', jobId: '01J8ZK3V5W6X7Y8Z9A0B1C2D3E', address: 'taro@example.com' };
const NOW = Date.parse('2025-06-01T00:00:00Z');

/** A token signed with SECRET as the module signs, whatever its payload (the module refuses to sign some). */
function forge(value: unknown): string {
  const payload = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString(
    'base64url',
  );
  const mac = createHmac('sha256', SECRET)
    .update(`switchboard/unsubscribe/v1\nk1.${payload}`)
    .digest()
    .subarray(0, 16)
    .toString('base64url');
  return `k1.${payload}.${mac}`;
}

describe('unsubscribe tokens', () => {
  it('round-trips client, job and address through a URL-safe token', () => {
    const tokens = new UnsubscribeTokens(SECRET, { clock: () => NOW + 123 });
    const token = tokens.sign(request);
    expect(token).toMatch(/^k1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(encodeURIComponent(token)).toBe(token);
    expect(tokens.verify(token)).toEqual({ ok: true, unsubscribe: { ...request, issuedAt: NOW } });
  });

  it('keeps working for years: tokens do not expire', () => {
    let now = NOW;
    const tokens = new UnsubscribeTokens(SECRET, { clock: () => now });
    const token = tokens.sign(request);
    now += 10 * 365 * 24 * 3600_000;
    expect(tokens.verify(token).ok).toBe(true);
  });

  it('refuses a token changed anywhere, signed with another key, or of an unknown key id', () => {
    const tokens = new UnsubscribeTokens(SECRET);
    const token = tokens.sign(request);
    const [kid, payload, mac] = token.split('.') as [string, string, string];
    const otherPayload = Buffer.from(
      JSON.stringify(['client-2', request.jobId, request.address, 1]),
    ).toString('base64url');
    expect(tokens.verify(`${kid}.${otherPayload}.${mac}`)).toEqual({ ok: false, reason: 'bad-signature' });
    const flipped = mac.startsWith('A') ? `B${mac.slice(1)}` : `A${mac.slice(1)}`;
    expect(tokens.verify(`${kid}.${payload}.${flipped}`)).toEqual({ ok: false, reason: 'bad-signature' });
    expect(new UnsubscribeTokens('x'.repeat(32)).verify(token)).toEqual({
      ok: false,
      reason: 'bad-signature',
    });
    expect(tokens.verify(`k9.${payload}.${mac}`)).toEqual({ ok: false, reason: 'unknown-key' });
  });

  it('signs with the current key and verifies retired ones during a rotation', () => {
    const before = new UnsubscribeTokens(OLD_SECRET, { kid: '2024b' });
    const after = new UnsubscribeTokens(SECRET, { kid: '2025a', retiredKeys: { '2024b': OLD_SECRET } });
    const oldToken = before.sign(request);
    expect(after.verify(oldToken)).toMatchObject({ ok: true, unsubscribe: request });
    expect(after.sign(request)).toMatch(/^2025a\./);
    expect(new UnsubscribeTokens(SECRET, { kid: '2025a' }).verify(oldToken)).toEqual({
      ok: false,
      reason: 'unknown-key',
    });
  });

  it('refuses tokens issued before notBefore, to the second', () => {
    let now = NOW;
    const signer = new UnsubscribeTokens(SECRET, { clock: () => now });
    const early = signer.sign(request);
    now = NOW + 1_500;
    const sameSecond = signer.sign(request);
    const verifier = new UnsubscribeTokens(SECRET, { notBefore: NOW + 1_200 });
    expect(verifier.verify(early)).toEqual({ ok: false, reason: 'revoked' });
    expect(verifier.verify(sameSecond).ok).toBe(true);
  });

  it('refuses short secrets and bad key ids when it is configured', () => {
    expect(() => new UnsubscribeTokens('k'.repeat(31))).toThrow(/31 bytes; at least 32/);
    expect(() => new UnsubscribeTokens(Buffer.alloc(16))).toThrow(RangeError);
    // 11 characters of UTF-8 that are 33 bytes: the limit is on bytes.
    expect(() => new UnsubscribeTokens('鍵'.repeat(11))).not.toThrow();
    expect(() => new UnsubscribeTokens(SECRET, { retiredKeys: { old: 'short' } })).toThrow(
      /key old is 5 bytes/,
    );
    expect(() => new UnsubscribeTokens(SECRET, { kid: 'a.b' })).toThrow(/key id/);
    expect(() => new UnsubscribeTokens(SECRET, { kid: '' })).toThrow(/key id/);
  });

  it('refuses to sign what it could not verify', () => {
    const tokens = new UnsubscribeTokens(SECRET);
    expect(() => tokens.sign({ ...request, address: '' })).toThrow(/address must be a non-empty string/);
    expect(() => tokens.sign({ ...request, jobId: 'j'.repeat(MAX_TOKEN_CHARS) })).toThrow(/at most 1024/);
  });

  it('answers any input without throwing, and refuses giant input before decoding it', () => {
    const tokens = new UnsubscribeTokens(SECRET);
    const valid = tokens.sign(request);
    const hostile: unknown[] = [
      undefined,
      null,
      42,
      {},
      ['k1', 'x', 'y'],
      '',
      '.',
      '..',
      'k1..',
      `${valid}.`,
      `${valid}=`,
      valid.replace(/\./g, ' '),
      `__proto__.${valid.split('.')[1]}.${valid.split('.')[2]}`,
      `constructor.${valid.split('.')[1]}.${valid.split('.')[2]}`,
      'k1.%%%.AAAAAAAAAAAAAAAAAAAAAA',
      `k1.${'A'.repeat(MAX_TOKEN_CHARS)}.AAAAAAAAAAAAAAAAAAAAAA`,
      'x'.repeat(50_000_000),
    ];
    for (const input of hostile) {
      const verdict = tokens.verify(input);
      expect(verdict.ok, String(input).slice(0, 40)).toBe(false);
    }
    // The length is refused before anything else: even a correctly signed token that is too long.
    const long = forge(['c', 'j'.repeat(800), 'a@b.jp', 1]);
    expect(long.length).toBeGreaterThan(MAX_TOKEN_CHARS);
    expect(tokens.verify(long)).toEqual({ ok: false, reason: 'malformed' });
    expect(tokens.verify(forge(['c', 'j'.repeat(700), 'a@b.jp', 1])).ok).toBe(true);
    fc.assert(
      fc.property(fc.string({ maxLength: 200, unit: 'binary' }), (input) => {
        expect(tokens.verify(input).ok).toBe(false);
      }),
    );
  });

  it('refuses a 22-character MAC that is not the canonical spelling of its 128 bits', () => {
    const tokens = new UnsubscribeTokens(SECRET);
    const [kid, payload, mac] = tokens.sign(request).split('.') as [string, string, string];
    // The last character holds 2 bits of MAC and 4 unused ones: set an unused bit.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(mac.at(-1)!);
    const noncanonical = `${mac.slice(0, -1)}${alphabet[last ^ 1]}`;
    expect(Buffer.from(noncanonical, 'base64url').equals(Buffer.from(mac, 'base64url'))).toBe(true);
    expect(tokens.verify(`${kid}.${payload}.${noncanonical}`)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('reads a validly signed but ill-formed payload as malformed, never as an unsubscribe', () => {
    const tokens = new UnsubscribeTokens(SECRET);
    expect(tokens.verify(forge(['c', 'j', 'a@b.jp', 1]))).toMatchObject({ ok: true });
    for (const value of [
      'not json',
      { __proto__: 1 },
      ['c', 'j', 'a@b.jp'],
      ['c', 'j', '', 1],
      ['c', 'j', 'a', -1],
    ]) {
      expect(tokens.verify(forge(value))).toEqual({ ok: false, reason: 'malformed' });
    }
  });
});

describe('List-Unsubscribe headers', () => {
  it('are exactly the two headers of RFC 8058 §3.1', () => {
    expect(listUnsubscribeHeaders('https://u.example.com/unsubscribe/opaquepart')).toEqual({
      'List-Unsubscribe': '<https://u.example.com/unsubscribe/opaquepart>',
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    });
    expect(
      listUnsubscribeHeaders(
        'https://example.com/unsubscribe.html?opaque=123456789',
        'mailto:listrequest@example.com?subject=unsubscribe',
      ),
    ).toEqual({
      'List-Unsubscribe':
        '<https://example.com/unsubscribe.html?opaque=123456789>, <mailto:listrequest@example.com?subject=unsubscribe>',
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    });
  });

  it('carry a token URL unchanged', () => {
    const token = new UnsubscribeTokens(SECRET).sign(request);
    const url = `https://u.example.com/u/${token}`;
    expect(listUnsubscribeHeaders(url)['List-Unsubscribe']).toBe(`<${url}>`);
  });

  it('refuse http, other schemes, and anything that could break out of the header', () => {
    expect(() => listUnsubscribeHeaders('http://example.com/u')).toThrow(/must be https/);
    expect(() => listUnsubscribeHeaders('http://127.0.0.1.example.com/u')).toThrow(/must be https/);
    // Plain http only to a loopback host: the local cloud's API.
    expect(listUnsubscribeHeaders('http://127.0.0.1:8080/unsubscribe/t')['List-Unsubscribe']).toBe(
      '<http://127.0.0.1:8080/unsubscribe/t>',
    );
    expect(() => listUnsubscribeHeaders('mailto:u@example.com')).toThrow(/must be https/);
    expect(() => listUnsubscribeHeaders('https://example.com/u', 'https://example.com/x')).toThrow(/mailto/);
    for (const bad of [
      'https://example.com/u\r\nBcc: x@example.com',
      'https://example.com/u>, <https://evil.example',
      'https://example.com/a b',
      'https://example.com/a,b',
      'not a url',
      'https://user:pw@example.com/u',
    ]) {
      expect(() => listUnsubscribeHeaders(bad), bad).toThrow(RangeError);
    }
    expect(() => listUnsubscribeHeaders('https://example.com/u', 'mailto:a@example.com\nX: y')).toThrow(
      RangeError,
    );
  });
});

describe('the one-click POST body', () => {
  it('is recognised as application/x-www-form-urlencoded, any letter case (RFC 8058 §3.2, §5)', () => {
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', 'List-Unsubscribe=One-Click')).toBe(
      true,
    );
    expect(
      isOneClickUnsubscribeBody(
        'Application/X-WWW-Form-Urlencoded; charset=UTF-8',
        'List-Unsubscribe=One-Click\r\n',
      ),
    ).toBe(true);
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', 'list-unsubscribe=one-click')).toBe(
      true,
    );
    expect(
      isOneClickUnsubscribeBody('application/x-www-form-urlencoded', 'a=1&List-Unsubscribe=One-Click'),
    ).toBe(true);
    expect(isOneClickUnsubscribeBody(undefined, 'List-Unsubscribe=One-Click')).toBe(true);
    expect(
      isOneClickUnsubscribeBody(
        'application/x-www-form-urlencoded',
        Buffer.from('List-Unsubscribe=One-Click'),
      ),
    ).toBe(true);
  });

  it('is recognised as a multipart/form-data field (RFC 8058 §3.2, RFC 7578)', () => {
    const body =
      '---FormBoundaryjWmhtjORrn\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n---FormBoundaryjWmhtjORrn--\r\n';
    expect(isOneClickUnsubscribeBody('multipart/form-data; boundary=-FormBoundaryjWmhtjORrn', body)).toBe(
      true,
    );
    expect(isOneClickUnsubscribeBody('multipart/form-data; boundary="-FormBoundaryjWmhtjORrn"', body)).toBe(
      true,
    );
    const browserStyle = [
      '------WebKitFormBoundary7MA4YWxkTrZu0gW',
      'Content-Disposition: form-data; name="other"',
      '',
      'x',
      '------WebKitFormBoundary7MA4YWxkTrZu0gW',
      'Content-Disposition: form-data; name=List-Unsubscribe',
      '',
      'One-Click',
      '------WebKitFormBoundary7MA4YWxkTrZu0gW--',
      '',
    ].join('\n');
    expect(
      isOneClickUnsubscribeBody(
        'multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW',
        browserStyle,
      ),
    ).toBe(true);
  });

  it('is not anything else', () => {
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', '')).toBe(false);
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', 'List-Unsubscribe=Yes')).toBe(
      false,
    );
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', 'One-Click=List-Unsubscribe')).toBe(
      false,
    );
    expect(isOneClickUnsubscribeBody('application/json', '{"List-Unsubscribe":"One-Click"}')).toBe(false);
    expect(isOneClickUnsubscribeBody('text/plain', 'List-Unsubscribe=One-Click')).toBe(false);
    expect(isOneClickUnsubscribeBody('multipart/form-data', 'List-Unsubscribe=One-Click')).toBe(false);
    const wrongName =
      '--b\r\nContent-Disposition: form-data; name="List-Subscribe"\r\n\r\nOne-Click\r\n--b--\r\n';
    expect(isOneClickUnsubscribeBody('multipart/form-data; boundary=b', wrongName)).toBe(false);
    const giant = `List-Unsubscribe=One-Click&${'x'.repeat(10_000)}`;
    expect(isOneClickUnsubscribeBody('application/x-www-form-urlencoded', giant)).toBe(false);
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.string({ maxLength: 60 }), (body, type) => {
        expect(() => isOneClickUnsubscribeBody(type, body)).not.toThrow();
        expect(() => isOneClickUnsubscribeBody(`multipart/form-data; boundary=${type}`, body)).not.toThrow();
      }),
    );
  });
});
