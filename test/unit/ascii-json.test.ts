import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asciiJson } from '#shared/webhooks/queue-message.ts';

describe('queue bodies are ASCII JSON', () => {
  it('escapes emoji, U+FFFE and lone surrogates, and parses back to the same strings', () => {
    const value = { text: 'こんにちは 👋 \uFFFE \uD800 "q" \\ ok' };
    const body = asciiJson(value);
    expect(body).toMatch(/^[\x20-\x7e]*$/);
    expect(JSON.parse(body)).toEqual(value);
  });

  it('round-trips any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const body = asciiJson({ s });
        return /^[\x20-\x7e]*$/.test(body) && JSON.parse(body).s === s;
      }),
    );
  });
});
