import { describe, expect, it } from 'vitest';
import { oncePerKey, VersionedCache } from '#shared/caches.ts';

describe('VersionedCache', () => {
  it('makes a value once per key and version, and closes the one a new version replaces', () => {
    const closed: string[] = [];
    const cache = new VersionedCache<string>({ maxEntries: 10, close: (v) => closed.push(v) });
    expect(cache.get('a', 1, () => 'a1')).toBe('a1');
    expect(cache.get('a', 1, () => 'again')).toBe('a1');
    expect(cache.get('a', 2, () => 'a2')).toBe('a2');
    expect(closed).toEqual(['a1']);
    expect(cache.isCurrent('a', 2)).toBe(true);
    expect(cache.isCurrent('a', 1)).toBe(false);
  });

  it('drops the least recently used key past its bound, closing its value', () => {
    const closed: string[] = [];
    const cache = new VersionedCache<string>({ maxEntries: 2, close: (v) => closed.push(v) });
    cache.get('a', 'x', () => 'A');
    cache.get('b', 'x', () => 'B');
    cache.get('a', 'x', () => 'unused');
    cache.get('c', 'x', () => 'C');
    expect(closed).toEqual(['B']);
    expect(cache.get('b', 'x', () => 'B again')).toBe('B again');
  });
});

describe('oncePerKey', () => {
  it("makes each key's value on its first use only, undefined being a key of its own", () => {
    const made: (string | undefined)[] = [];
    const clientFor = oncePerKey((region: string | undefined) => {
      made.push(region);
      return { region };
    });
    expect(clientFor('ap-northeast-1')).toBe(clientFor('ap-northeast-1'));
    expect(clientFor(undefined)).toBe(clientFor(undefined));
    expect(made).toEqual(['ap-northeast-1', undefined]);
  });
});
