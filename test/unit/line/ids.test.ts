import { describe, expect, it } from 'vitest';
import { InvalidUlidError, isUlid, ulidToUuid } from '#shared/ids.ts';

// Published ULID <-> UUID pairs (the same 128 bits), from other implementations' tests and docs.
const VECTORS: readonly { source: string; ulid: string; uuid: string }[] = [
  // ulid/javascript (the reference JS implementation), test/node/uuid.spec.ts
  {
    source: 'ulid/javascript',
    ulid: '01ARYZ6S41TSV4RRFFQ69G5FAV',
    uuid: '01563DF3-6481-D676-4C61-EFB99302BD5B',
  },
  {
    source: 'ulid/javascript',
    ulid: '01JQ4T23H220KM7X0B3V1109DQ',
    uuid: '0195C9A1-0E22-1027-43F4-0B1EC21025B7',
  },
  {
    source: 'ulid/javascript',
    ulid: '01JQ4T8BHJR0A5YKX7SVTVX0YN',
    uuid: '0195C9A4-2E32-C014-5F4F-A7CEF5BE83D5',
  },
  {
    source: 'ulid/javascript',
    ulid: '01JQ4T8X6CA54VSH0AANN0SWCX',
    uuid: '0195C9A4-74CC-5149-BCC4-0A556A0CF19D',
  },
  // the Rust `ulid` crate, src/uuid.rs, test uuid_str_cycle
  { source: 'ulid (Rust)', ulid: '3Q38XWW0Q98GMAD3NHWZM2PZWZ', uuid: '771a3bce-02e9-4428-a68e-b1e7e82b7f9f' },
  // mpyw/uuid-ulid-converter (PHP), README
  {
    source: 'mpyw/uuid-ulid-converter',
    ulid: '61862H2EWP9TCTRX3MJ15XNY7X',
    uuid: 'c1418511-3b96-4e99-ac74-74904bdaf8fd',
  },
  // the ULID spec's smallest and largest values
  { source: 'ULID spec', ulid: '00000000000000000000000000', uuid: '00000000-0000-0000-0000-000000000000' },
  { source: 'ULID spec', ulid: '7ZZZZZZZZZZZZZZZZZZZZZZZZZ', uuid: 'ffffffff-ffff-ffff-ffff-ffffffffffff' },
];

describe('ULID -> UUID', () => {
  it.each(VECTORS)('$source: $ulid is $uuid', ({ ulid, uuid }) => {
    expect(ulidToUuid(ulid)).toBe(uuid.toLowerCase());
  });

  it('reads a lower-case ULID as the same value', () => {
    expect(ulidToUuid('01aryz6s41tsv4rrffq69g5fav')).toBe('01563df3-6481-d676-4c61-efb99302bd5b');
  });

  it('turns LINE’s documented webhook event IDs into retry keys', () => {
    for (const id of [
      '01FZ74A0TDDPYRVKNK77XKC3ZR',
      '01HMQGW40RZJPJM3RAJP7BHC2Q',
      '01KPW6071XGPXPAF4XCN96XEAN',
    ]) {
      expect(isUlid(id)).toBe(true);
      const uuid = ulidToUuid(id);
      expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
  });

  it('refuses what is not a ULID: too long a value, letters Crockford leaves out, wrong length', () => {
    for (const bad of [
      '80000000000000000000000000',
      '01ARYZ6S41TSV4RRFFQ69G5FAI',
      '01ARYZ6S41',
      'testwebhookeventid',
    ]) {
      expect(isUlid(bad)).toBe(false);
      expect(() => ulidToUuid(bad)).toThrow(InvalidUlidError);
    }
  });
});
