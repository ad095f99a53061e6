import { describe, expect, it } from 'vitest';
import { normalizeLineUserId, normalizePhoneNumber } from '#shared/csv/recipients.ts';

describe('normalizePhoneNumber (default region JP)', () => {
  it.each([
    ['090-1234-5678', '+819012345678'],
    ['09012345678', '+819012345678'],
    ['="09012345678"', '+819012345678'],
    ['="090-1234-5678" ', '+819012345678'],
    ["'09012345678", '+819012345678'],
    ['090 1234 5678', '+819012345678'],
    ['090.1234.5678', '+819012345678'],
    ['(090) 1234-5678', '+819012345678'],
    ['+81 90 1234 5678', '+819012345678'],
    ['+81-90-1234-5678', '+819012345678'],
    ['+81 (0)90 1234 5678', '+819012345678'],
    ['819012345678', '+819012345678'],
    ['０９０－１２３４－５６７８', '+819012345678'],
    ['０９０ー１２３４ー５６７８', '+819012345678'],
    ['＋８１　９０　１２３４　５６７８', '+819012345678'],
    ['090‐1234‐5678', '+819012345678'],
    ["'09012345678", '+819012345678'],
    ['  090-1234-5678  ', '+819012345678'],
    ['9012345678', '+819012345678'],
    ['9012345678.0', '+819012345678'],
    ['03-1234-5678', '+81312345678'],
    ['0120-123-456', '+81120123456'],
    ['+1 415 555 2671', '+14155552671'],
  ])('%s → %s', (cell, e164) => {
    expect(normalizePhoneNumber(cell, 'JP')).toEqual({ ok: true, recipient: e164 });
  });

  it.each([
    ['', 'phone-empty'],
    ['   ', 'phone-empty'],
    ['\u3000', 'phone-empty'],
    ['9.01235E+10', 'phone-scientific-notation'],
    ['8.19012E+11', 'phone-scientific-notation'],
    ['090-1234-567', 'invalid-phone'],
    ['090-1234-56789', 'invalid-phone'],
    ['1234', 'invalid-phone'],
    ['abc', 'invalid-phone'],
    ['090-1234-5678 内線12', 'invalid-phone'],
    ['090-1234-5678 / 080-1111-2222', 'invalid-phone'],
    ['tel:090-1234-5678', 'invalid-phone'],
    ['0000000000', 'invalid-phone'],
    ['++819012345678', 'invalid-phone'],
  ])('%j is rejected as %s', (cell, code) => {
    expect(normalizePhoneNumber(cell, 'JP')).toMatchObject({ ok: false, code });
  });

  it('reads national numbers in the default region', () => {
    expect(normalizePhoneNumber('(415) 555-2671', 'US')).toEqual({ ok: true, recipient: '+14155552671' });
    expect(normalizePhoneNumber('(415) 555-2671', 'JP')).toMatchObject({ ok: false, code: 'invalid-phone' });
  });
});

describe('normalizeLineUserId', () => {
  it('accepts U and 32 lower-case hex digits, trimmed', () => {
    expect(normalizeLineUserId(' U4af4980629a0b2c7b4c8e2c1f1d0a9e3 ')).toEqual({
      ok: true,
      recipient: 'U4af4980629a0b2c7b4c8e2c1f1d0a9e3',
    });
  });

  it.each([
    ['', 'line-user-id-empty'],
    ['U4af4980629a0b2c7b4c8e2c1f1d0a9e', 'invalid-line-user-id'],
    ['u4af4980629a0b2c7b4c8e2c1f1d0a9e3', 'invalid-line-user-id'],
    ['U4AF4980629A0B2C7B4C8E2C1F1D0A9E3', 'invalid-line-user-id'],
    ['@line_id', 'invalid-line-user-id'],
  ])('%j is rejected as %s', (cell, code) => {
    expect(normalizeLineUserId(cell)).toMatchObject({ ok: false, code });
  });
});
