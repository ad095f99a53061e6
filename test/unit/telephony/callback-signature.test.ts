import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CallbackSignatureError,
  MalformedSignatureError,
  MissingSignatureError,
  SignatureMismatchError,
  StaleSignatureError,
  signCallback,
  verifyCallbackSignature,
} from '#shared/telephony/callback-signature.ts';
import { MalformedCallStatusError, readSignedCallStatusEvent } from '#shared/telephony/status-event.ts';

const secret = 'whsec_sandbox_0123456789';
const now = Date.parse('2026-01-05T09:00:00.000Z');
const t = now / 1000;
const clock = { now: () => now };
// Raw bytes as the provider sent them: key order and a non-ASCII reason must not be re-serialised.
const rawBody =
  '{"status":"failed","callId":"CA1","idempotencyKey":"9b2f6c1e-0000-5000-8000-000000000001",' +
  '"at":"2026-01-05T09:00:00.000Z","sequence":1,"reason":"番号が存在しません ☎"}';

function expectRejected(header: string | undefined, body: string | Uint8Array, type: new () => Error) {
  const attempt = () => verifyCallbackSignature({ header, rawBody: body, secrets: secret, clock });
  expect(attempt).toThrow(type);
  expect(attempt).toThrow(CallbackSignatureError);
}

describe('callback signature', () => {
  it('accepts a callback signed with the secret, as a string or as the raw bytes', () => {
    const header = signCallback(secret, rawBody, t);
    const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest('hex');
    expect(header).toBe(`t=${t},v1=${expected}`);
    expect(verifyCallbackSignature({ header, rawBody, secrets: secret, clock })).toBe(t);
    expect(verifyCallbackSignature({ header, rawBody: Buffer.from(rawBody), secrets: secret, clock })).toBe(
      t,
    );
  });

  it('rejects a tampered body, even one that means the same JSON', () => {
    const header = signCallback(secret, rawBody, t);
    expectRejected(header, rawBody.replace('"failed"', '"completed"'), SignatureMismatchError);
    expectRejected(header, JSON.stringify(JSON.parse(rawBody), null, 1), SignatureMismatchError);
  });

  it('rejects a signature made with another secret, and accepts either secret during a rotation', () => {
    const header = signCallback('another-secret', rawBody, t);
    expectRejected(header, rawBody, SignatureMismatchError);
    expect(verifyCallbackSignature({ header, rawBody, secrets: [secret, 'another-secret'], clock })).toBe(t);
  });

  it('rejects a replay older than five minutes, and a timestamp too far ahead', () => {
    expectRejected(signCallback(secret, rawBody, t - 301), rawBody, StaleSignatureError);
    expectRejected(signCallback(secret, rawBody, t + 301), rawBody, StaleSignatureError);
    expect(
      verifyCallbackSignature({
        header: signCallback(secret, rawBody, t - 300),
        rawBody,
        secrets: secret,
        clock,
      }),
    ).toBe(t - 300);
  });

  it('tells a missing header from a malformed one', () => {
    const sig = signCallback(secret, rawBody, t).split(',v1=')[1]!;
    expectRejected(undefined, rawBody, MissingSignatureError);
    expectRejected('  ', rawBody, MissingSignatureError);
    expectRejected(`v1=${sig}`, rawBody, MalformedSignatureError);
    expectRejected(`t=${t}`, rawBody, MalformedSignatureError);
    expectRejected(`t=soon,v1=${sig}`, rawBody, MalformedSignatureError);
    expectRejected(`t=${t},v1=${sig.slice(2)}`, rawBody, MalformedSignatureError);
    expectRejected(`t=${t};v1=${sig}`, rawBody, MalformedSignatureError);
  });

  it('ignores signature schemes it does not know, as long as a v1 matches', () => {
    const header = `${signCallback(secret, rawBody, t)},v2=whatever`;
    expect(verifyCallbackSignature({ header, rawBody, secrets: secret, clock })).toBe(t);
  });
});

describe('reading a signed status callback', () => {
  it('returns the event once the signature holds', () => {
    const event = readSignedCallStatusEvent({
      header: signCallback(secret, rawBody, t),
      rawBody,
      secrets: secret,
      clock,
    });
    expect(event).toEqual({
      callId: 'CA1',
      idempotencyKey: '9b2f6c1e-0000-5000-8000-000000000001',
      status: 'failed',
      at: '2026-01-05T09:00:00.000Z',
      sequence: 1,
      reason: '番号が存在しません ☎',
    });
  });

  it('checks the signature before looking at the body', () => {
    expect(() =>
      readSignedCallStatusEvent({
        header: signCallback('wrong', 'not json', t),
        rawBody: 'not json',
        secrets: secret,
        clock,
      }),
    ).toThrow(SignatureMismatchError);
  });

  it('rejects a correctly signed body of the wrong shape with a clear error', () => {
    const body = '{"callId":"CA1","status":"exploded","at":"yesterday","sequence":0}';
    const read = () =>
      readSignedCallStatusEvent({
        header: signCallback(secret, body, t),
        rawBody: body,
        secrets: secret,
        clock,
      });
    expect(read).toThrow(MalformedCallStatusError);
    expect(read).toThrow(/status/);
  });
});
