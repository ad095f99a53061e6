import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  emailSuppressionKey,
  MAX_ADDRESS_OCTETS,
  MAX_LOCAL_PART_OCTETS,
  normalizeEmailAddress,
} from '#shared/email/address.ts';

function accepted(raw: string): string {
  const check = normalizeEmailAddress(raw);
  if (!check.ok) throw new Error(`refused ${JSON.stringify(raw)}: ${check.reason}`);
  return check.address;
}

function refusal(raw: string): string {
  const check = normalizeEmailAddress(raw);
  if (check.ok) throw new Error(`accepted ${JSON.stringify(raw)} as ${check.address}`);
  return check.reason;
}

describe('email address normalisation', () => {
  it('trims spaces of every kind and lower-cases the domain, keeping the local part’s case', () => {
    expect(accepted('  Taro.Yamada@Example.COM\t')).toBe('Taro.Yamada@example.com');
    expect(accepted('\u3000taro@example.com\u3000')).toBe('taro@example.com');
    expect(accepted('\u00a0\ufefftaro@example.com\r\n')).toBe('taro@example.com');
  });

  it('reads a full-width address (typed with the Japanese IME on) as the ASCII one, local part included', () => {
    expect(accepted('ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ')).toBe('taro@example.com');
    expect(accepted('ＴＡＲＯ＋ｎｅｗｓ＠ｅｘａｍｐｌｅ．ｃｏｍ')).toBe('TARO+news@example.com');
    expect(accepted('taro＠example.com')).toBe('taro@example.com');
    expect(accepted('taro@example。co。jp')).toBe('taro@example.co.jp');
  });

  it('refuses other non-ASCII in the local part rather than letting NFKC change the mailbox', () => {
    expect(refusal('①taro@example.com')).toMatch(
      /"①" \(U\+2460\), which is not ASCII; Amazon SES sends only/,
    );
    expect(refusal('ﬁle@example.com')).toMatch(/not ASCII/);
    expect(refusal('山田@example.com')).toMatch(/not ASCII/);
    expect(refusal('tarо@example.com')).toMatch(/U\+043E/); // a Cyrillic o
  });

  it('converts an internationalised domain to Punycode (例え.テスト → xn--…)', () => {
    expect(accepted('taro@例え.テスト')).toBe('taro@xn--r8jz45g.xn--zckzah');
    expect(accepted('taro@ドメイン名例.jp')).toMatch(/^taro@xn--[a-z0-9-]+\.jp$/);
    expect(accepted('taro@ＥＸＡＭＰＬＥ.ｊｐ')).toBe('taro@example.jp');
    expect(accepted('taro@xn--r8jz45g.xn--zckzah')).toBe('taro@xn--r8jz45g.xn--zckzah');
  });

  it('refuses what is not an address, with a reason an operator can act on', () => {
    const cases: [string, RegExp][] = [
      ['', /^email address is empty$/],
      ['   \u3000 ', /^email address is empty$/],
      ['taro.example.com', /has no @$/],
      ['taro@@example.com', /has more than one @/],
      ['a@example.com, b@example.com', /more than one address; put one address in each row/],
      ['a@example.com;b@example.com', /more than one address/],
      ['@example.com', /nothing before the @/],
      ['taro@', /nothing after the @/],
      ['taro @example.com', /contains a space/],
      ['.taro@example.com', /starts or ends with a dot/],
      ['taro.@example.com', /starts or ends with a dot/],
      ['ta..ro@example.com', /two dots in a row/],
      ['ta,ro@example.com', /has ",", which an address cannot contain/],
      ['"taro yamada"@example.com', /quoted local parts are not accepted/],
      ['"a@b"@example.com', /quoted local parts are not accepted/],
      ['taro@localhost', /has no dot/],
      ['taro@example..com', /empty part/],
      ['taro@.example.com', /empty part/],
      ['taro@example.com.', /empty part/],
      ['taro@-example.com', /starts or ends with a hyphen/],
      ['taro@example-.com', /starts or ends with a hyphen/],
      ['taro@exa_mple.com', /has "_", which a domain name cannot contain/],
      ['taro@ex%41mple.com', /has "%"/],
      ['taro@[192.0.2.1]', /is an IP address; use a domain name/],
      ['taro@192.0.2.1', /is an IP address/],
      ['taro@IPv6:2001:db8::1', /has ":"/],
      [
        'Taro <taro@example.com>',
        /looks like a name with an address .*keep only the address, taro@example.com$/,
      ],
      ['<taro@example.com>', /keep only the address, taro@example.com/],
      ['taro@example.com>', /contains "<" or ">"/],
      ['mailto:taro@example.com', /starts with "mailto:"/],
      [`taro@${'a'.repeat(64)}.com`, /64 characters long; at most 63/],
    ];
    for (const [raw, reason] of cases) {
      const check = normalizeEmailAddress(raw);
      expect(check.ok, raw).toBe(false);
      expect(check.ok ? '' : check.reason, raw).toMatch(reason);
    }
    expect(refusal('taro')).toMatch(/^invalid email address: /);
  });

  it('applies RFC 5321’s limits: 64 octets of local part, 254 of address, 63 per label', () => {
    const local64 = 'a'.repeat(MAX_LOCAL_PART_OCTETS);
    expect(accepted(`${local64}@example.com`)).toBe(`${local64}@example.com`);
    expect(refusal(`${local64}b@example.com`)).toMatch(/65 characters long; at most 64/);
    const label63 = 'b'.repeat(63);
    expect(accepted(`taro@${label63}.com`)).toBe(`taro@${label63}.com`);
    // 64 + 1 + 63 + 1 + 63 + 1 + 61 = 254
    const longest = `${local64}@${label63}.${label63}.${'c'.repeat(61)}`;
    expect(longest).toHaveLength(MAX_ADDRESS_OCTETS);
    expect(accepted(longest)).toBe(longest);
    expect(refusal(`${local64}@${label63}.${label63}.${'c'.repeat(62)}`)).toMatch(
      /is 255 characters long; an address has at most 254/,
    );
    // The limit applies to the Punycode form SES sends, not to what was typed.
    const idnLabel = 'テ'.repeat(20);
    expect(accepted(`a@${idnLabel}.jp`).length).toBeGreaterThan(`a@${idnLabel}.jp`.length);
  });

  it('accepts every RFC 5322 atext character in a local part', () => {
    expect(accepted("!#$%&'*+/=?^_`{|}~-.0@example.com")).toBe("!#$%&'*+/=?^_`{|}~-.0@example.com");
  });

  it('answers any input without throwing, and giant input without reading it all', () => {
    const giant = `${'a'.repeat(5_000_000)}@example.com`;
    expect(refusal(giant)).toMatch(/is 5000012 characters long; an address has at most 254/);
    // The length is refused before anything else is done: even spaces that trimming would remove.
    expect(refusal(`taro@example.com${' '.repeat(1_000)}`)).toMatch(/is 1016 characters long/);
    for (const hostile of [
      undefined,
      null,
      42,
      {},
      [],
      '__proto__',
      'constructor@prototype',
      '@',
      '@@',
      '\u0000@x.jp',
    ]) {
      expect(() => normalizeEmailAddress(hostile as string)).not.toThrow();
    }
    expect(accepted('__proto__@example.com')).toBe('__proto__@example.com');
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (raw) => {
        const check = normalizeEmailAddress(raw);
        if (check.ok) {
          expect(check.address).toMatch(/^[\x21-\x7e]+@[a-z0-9.-]+$/);
          expect(check.address.length).toBeLessThanOrEqual(MAX_ADDRESS_OCTETS);
          expect(normalizeEmailAddress(check.address)).toEqual(check);
        } else {
          expect(check.reason.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 1_000 },
    );
  });

  it('is idempotent on what it accepts', () => {
    fc.assert(
      fc.property(fc.emailAddress(), (raw) => {
        const check = normalizeEmailAddress(raw);
        if (check.ok) expect(normalizeEmailAddress(check.address)).toEqual(check);
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('suppression key', () => {
  it('matches an address whatever the letter case of its local part', () => {
    expect(emailSuppressionKey(accepted('Taro.Yamada@Example.com'))).toBe('taro.yamada@example.com');
    expect(emailSuppressionKey(accepted('ＴＡＲＯ＠ＥＸＡＭＰＬＥ．ＣＯＭ'))).toBe(
      emailSuppressionKey(accepted('taro@example.com')),
    );
  });
});
