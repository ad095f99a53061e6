import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { messageParts } from '#shared/sms/parts.ts';

const EXTENSION = ['€', '[', ']', '{', '}', '^', '~', '\\', '|', '\f'];
const EMOJI = '😀'; // U+1F600: a surrogate pair, 2 UTF-16 units

describe('messageParts: GSM 7-bit', () => {
  it('ASCII letters, digits and punctuation are GSM, one septet each', () => {
    expect(messageParts('Your code is 1234. Reply STOP to opt out!')).toEqual({
      encoding: 'GSM',
      parts: 1,
      characters: 41,
    });
  });

  it('the basic set beyond ASCII stays GSM: £ ¥ è é Ç Ø Å Δ Σ ß ¡ ¿ Ä ñ ü à §, newlines', () => {
    const text = '£¥èéÇØÅΔΣßÉ¡¿ÄÖÑÜ§äöñüà\r\n@$_';
    expect(messageParts(text)).toEqual({ encoding: 'GSM', parts: 1, characters: [...text].length });
  });

  it('160 septets are one part, 161 are two (153 + 8)', () => {
    expect(messageParts('a'.repeat(160))).toEqual({ encoding: 'GSM', parts: 1, characters: 160 });
    expect(messageParts('a'.repeat(161))).toEqual({ encoding: 'GSM', parts: 2, characters: 161 });
  });

  it('split texts fill 153 septets a part: 306 is two parts, 307 three', () => {
    expect(messageParts('a'.repeat(153 * 2)).parts).toBe(2);
    expect(messageParts('a'.repeat(153 * 2 + 1)).parts).toBe(3);
    expect(messageParts('a'.repeat(153 * 3)).parts).toBe(3);
  });

  it.each(EXTENSION)('the extension character %j is GSM and counts 2 septets', (char) => {
    expect(messageParts(`Total ${char}`)).toEqual({ encoding: 'GSM', parts: 1, characters: 8 });
  });

  it('extension characters count 2 against the 160: 80 of them fit one part, 81 do not', () => {
    expect(messageParts('€'.repeat(80))).toEqual({ encoding: 'GSM', parts: 1, characters: 160 });
    expect(messageParts('€'.repeat(81))).toEqual({ encoding: 'GSM', parts: 2, characters: 162 });
    expect(messageParts(`${'a'.repeat(159)}{`)).toEqual({ encoding: 'GSM', parts: 2, characters: 161 });
  });

  it('an escaped character is never cut between parts: it moves whole to the next part', () => {
    // 152 septets, then € (2) does not fit the 153 left in part one: 3 parts where 306/153 is 2.
    const text = `${'a'.repeat(152)}€${'a'.repeat(152)}`;
    expect(messageParts(text)).toEqual({ encoding: 'GSM', parts: 3, characters: 306 });
    // 151 + € ends part one exactly at 153.
    expect(messageParts(`${'a'.repeat(151)}€${'a'.repeat(153)}`).parts).toBe(2);
  });
});

describe('messageParts: UCS-2', () => {
  it('Japanese is UCS-2, one unit a character', () => {
    expect(messageParts('ご予約の確認です。明日10時にお待ちしております。')).toEqual({
      encoding: 'UCS2',
      parts: 1,
      characters: 25,
    });
  });

  it('one character outside GSM makes the whole text UCS-2', () => {
    const text = `${'a'.repeat(100)}ç`; // ç (U+00E7) is not GSM 03.38's Ç
    expect(messageParts(text)).toEqual({ encoding: 'UCS2', parts: 2, characters: 101 });
    expect(messageParts('Price: 5€ — today').encoding).toBe('UCS2'); // the em dash
    expect(messageParts('`backtick`').encoding).toBe('UCS2');
  });

  it('70 units are one part, 71 are two (67 + 4)', () => {
    expect(messageParts('あ'.repeat(70))).toEqual({ encoding: 'UCS2', parts: 1, characters: 70 });
    expect(messageParts('あ'.repeat(71))).toEqual({ encoding: 'UCS2', parts: 2, characters: 71 });
  });

  it('split texts fill 67 units a part: 134 is two parts, 135 three', () => {
    expect(messageParts('あ'.repeat(67 * 2)).parts).toBe(2);
    expect(messageParts('あ'.repeat(67 * 2 + 1)).parts).toBe(3);
  });

  it('an emoji is a surrogate pair: 2 units', () => {
    expect(messageParts(EMOJI)).toEqual({ encoding: 'UCS2', parts: 1, characters: 2 });
    expect(messageParts(EMOJI.repeat(35))).toEqual({ encoding: 'UCS2', parts: 1, characters: 70 });
    expect(messageParts(`${EMOJI.repeat(35)}a`)).toEqual({ encoding: 'UCS2', parts: 2, characters: 71 });
  });

  it('a surrogate pair is never cut between parts', () => {
    // 66 units, then an emoji (2) does not fit the 67 left: it opens part two.
    const text = `${'あ'.repeat(66)}${EMOJI}${'あ'.repeat(66)}`;
    expect(messageParts(text)).toEqual({ encoding: 'UCS2', parts: 3, characters: 134 });
    expect(messageParts(`${'あ'.repeat(65)}${EMOJI}${'あ'.repeat(67)}`).parts).toBe(2);
  });

  it('a long Japanese reminder costs several parts', () => {
    const text = '【スイッチボード】ご予約の確認です。'.repeat(10); // 180 units
    expect(messageParts(text)).toEqual({ encoding: 'UCS2', parts: 3, characters: 180 });
  });
});

describe('messageParts: any text', () => {
  it('an empty text costs nothing', () => {
    expect(messageParts('')).toEqual({ encoding: 'GSM', parts: 0, characters: 0 });
  });

  it('split texts need at least length / capacity parts, and greedy filling wastes at most one unit a part', () => {
    const alphabet = fc.constantFrom('a', 'Z', ' ', '€', '{', 'あ', 'ç', EMOJI, '漢');
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 400 }), (chars) => {
        const text = chars.join('');
        const { encoding, parts, characters } = messageParts(text);
        const [single, split] = encoding === 'GSM' ? [160, 153] : [70, 67];
        if (characters === 0) expect(parts).toBe(0);
        else if (characters <= single) expect(parts).toBe(1);
        else {
          expect(parts).toBeGreaterThanOrEqual(Math.ceil(characters / split));
          // A character costs at most 2 units, so greedy filling leaves at most 1 unit of a part unused.
          expect(parts).toBeLessThanOrEqual(Math.floor((characters - 1) / (split - 1)) + 1);
        }
      }),
    );
  });
});
