import { validateSignature } from '@line/bot-sdk';
import { describe, expect, it } from 'vitest';
import { decodeRequestBody, getHeader } from '#shared/http/api-gateway.ts';
import { signBody, verifySignature } from '#shared/line/signature.ts';
import { fixtureBytes, webhookFixtureNames } from './fixtures.ts';

const SECRET = '8c570fa6dd201bb328f1c1eac23a96d8';
const OLD_SECRET = 'e3b0c44298fc1c149afbf4c8996fb924';

describe('webhook signatures', () => {
  it('computes HMAC-SHA256 in base64 (RFC 4231 test case 2)', () => {
    const expected = Buffer.from('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843', 'hex');
    expect(signBody(Buffer.from('what do ya want for nothing?'), 'Jefe')).toBe(expected.toString('base64'));
  });

  it.each(webhookFixtureNames)('accepts the signed bytes of %s, as LINE’s own SDK does', (name) => {
    const body = fixtureBytes(name);
    const signature = signBody(body, SECRET);
    expect(verifySignature(body, signature, [SECRET])).toBe(true);
    expect(validateSignature(body, SECRET, signature)).toBe(true);
  });

  it('rejects a wrong secret, a changed body, and a missing, empty or malformed header', () => {
    const body = fixtureBytes('follow');
    const signature = signBody(body, SECRET);
    expect(verifySignature(body, signBody(body, 'another secret'), [SECRET])).toBe(false);
    const tampered = Buffer.from(body);
    tampered[tampered.indexOf('false')] = 't'.charCodeAt(0);
    expect(verifySignature(tampered, signature, [SECRET])).toBe(false);
    expect(verifySignature(body, undefined, [SECRET])).toBe(false);
    expect(verifySignature(body, '', [SECRET])).toBe(false);
    expect(verifySignature(body, 'not a signature', [SECRET])).toBe(false);
    expect(verifySignature(body, signature.slice(0, -4), [SECRET])).toBe(false);
    expect(verifySignature(body, `${signature}AAAA`, [SECRET])).toBe(false);
    // Hex of the right digest is not the base64 LINE sends.
    const hex = Buffer.from(signature, 'base64').toString('hex');
    expect(verifySignature(body, hex, [SECRET])).toBe(false);
  });

  it('accepts either secret during a rotation, and only the live ones', () => {
    const body = fixtureBytes('message-text-mention-emoji');
    const signedWithOld = signBody(body, OLD_SECRET);
    expect(verifySignature(body, signedWithOld, [SECRET, OLD_SECRET])).toBe(true);
    expect(verifySignature(body, signBody(body, SECRET), [SECRET, OLD_SECRET])).toBe(true);
    expect(verifySignature(body, signedWithOld, [SECRET])).toBe(false);
  });

  it('refuses a configuration with no secret or more than two', () => {
    const body = fixtureBytes('follow');
    expect(() => verifySignature(body, signBody(body, SECRET), [])).toThrow(RangeError);
    expect(() => verifySignature(body, signBody(body, SECRET), [SECRET, OLD_SECRET, 'third'])).toThrow(
      /1 to 2 channel secrets/,
    );
  });

  it('verifies emoji and non-ASCII bodies on their bytes, and fails once they are re-serialised', () => {
    for (const name of ['message-text-non-ascii', 'message-text-mention-emoji', 'follow']) {
      const body = fixtureBytes(name);
      const signature = signBody(body, SECRET);
      expect(verifySignature(body, signature, [SECRET])).toBe(true);
      const reserialised = Buffer.from(JSON.stringify(JSON.parse(body.toString('utf8'))), 'utf8');
      expect(reserialised.equals(body)).toBe(false);
      expect(verifySignature(reserialised, signature, [SECRET])).toBe(false);
    }
  });

  it('verifies a body API Gateway handed over base64-encoded, after decoding it', () => {
    const body = fixtureBytes('message-text-non-ascii');
    const signature = signBody(body, SECRET);
    const event = { body: body.toString('base64'), isBase64Encoded: true };
    expect(verifySignature(decodeRequestBody(event), signature, [SECRET])).toBe(true);
    // Verifying the base64 text itself would be wrong.
    expect(verifySignature(Buffer.from(event.body), signature, [SECRET])).toBe(false);
  });

  it('decodes a text body API Gateway handed over as a string to its original UTF-8 bytes', () => {
    const body = fixtureBytes('message-text-non-ascii');
    expect(
      Buffer.from(decodeRequestBody({ body: body.toString('utf8'), isBase64Encoded: false })).equals(body),
    ).toBe(true);
    expect(decodeRequestBody({})).toHaveLength(0);
    expect(decodeRequestBody({ body: null })).toHaveLength(0);
  });
});

describe('getHeader', () => {
  it('finds the signature header whatever the case of its name', () => {
    expect(getHeader({ 'x-line-signature': 'a' }, 'x-line-signature')).toBe('a');
    expect(getHeader({ 'X-Line-Signature': 'b' }, 'x-line-signature')).toBe('b');
    expect(getHeader({ 'X-LINE-SIGNATURE': 'c' }, 'X-Line-Signature')).toBe('c');
  });

  it('is undefined when the header or the headers are missing', () => {
    expect(getHeader({ 'content-type': 'application/json' }, 'x-line-signature')).toBeUndefined();
    expect(getHeader(undefined, 'x-line-signature')).toBeUndefined();
    expect(getHeader(null, 'x-line-signature')).toBeUndefined();
  });
});
