/** An email job's list: its address column by Japanese and English headers, its addresses normalised. */
import { describe, expect, it } from 'vitest';
import { mapHeader } from '#shared/csv/headers.ts';
import { normalizeEmailRecipient } from '#shared/csv/recipients.ts';

describe('an email list', () => {
  it.each([
    'メールアドレス',
    'Eメール',
    'Ｅメールアドレス',
    'email',
    'E-Mail',
    'e_mail',
    'mail address',
    'メール',
  ])('finds the address column named %j', (header) => {
    expect(mapHeader(['名前', header, 'クーポン'], 'email')).toMatchObject({
      ok: true,
      map: { recipient: 1 },
    });
  });

  it('says which column it needs when the header has none', () => {
    expect(mapHeader(['名前', '電話番号'], 'email')).toEqual({
      ok: false,
      reason:
        'no email address column (name it メールアドレス, Eメール, email or e-mail): the header row has 名前, 電話番号',
    });
  });

  it('sends to the address trimmed, full-width folded, lower-cased, its IDN domain in punycode', () => {
    expect(normalizeEmailRecipient('  Taro.Yamada@Example.COM ')).toEqual({
      ok: true,
      recipient: 'taro.yamada@example.com',
    });
    expect(normalizeEmailRecipient('ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ')).toEqual({
      ok: true,
      recipient: 'taro@example.com',
    });
    expect(normalizeEmailRecipient('info@例え.テスト')).toEqual({
      ok: true,
      recipient: 'info@xn--r8jz45g.xn--zckzah',
    });
  });

  it('rejects what is not an address, with its reason', () => {
    expect(normalizeEmailRecipient('')).toMatchObject({ ok: false, code: 'email-empty' });
    for (const cell of [
      'taro',
      'taro@@example.com',
      'Taro <taro@example.com>',
      'taro@localhost',
      'a..b@example.com',
    ])
      expect(normalizeEmailRecipient(cell)).toMatchObject({ ok: false, code: 'invalid-email' });
  });
});
