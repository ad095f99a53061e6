import { isUtf8 } from 'node:buffer';
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { makeCellDecoder, SNIFF_BYTES, sniffEncoding, utf8OrCp932 } from '#shared/csv/encoding.ts';
import { ingestBytes } from './support.ts';

const latin1 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('latin1');

describe('sniffEncoding', () => {
  it('recognises BOMs', () => {
    expect(sniffEncoding(Buffer.from('\ufeffphone\n'), true)).toEqual({ encoding: 'utf-8', bomLength: 3 });
    expect(sniffEncoding(Buffer.from('\ufeffphone\n', 'utf16le'), true)).toEqual({
      encoding: 'utf-16le',
      bomLength: 2,
    });
    const be = Buffer.from('\ufeffphone\n', 'utf16le').swap16();
    expect(sniffEncoding(be, true)).toEqual({ encoding: 'utf-16be', bomLength: 2 });
  });

  it('tells Shift_JIS from UTF-8 without a BOM, and leaves pure ASCII undecided', () => {
    expect(sniffEncoding(iconv.encode('電話番号\r\n', 'cp932'), true)).toEqual({
      encoding: 'cp932',
      bomLength: 0,
    });
    expect(sniffEncoding(Buffer.from('電話番号\n'), true)).toEqual({ encoding: 'utf-8', bomLength: 0 });
    expect(sniffEncoding(Buffer.from('phone\n090\n'), true)).toEqual({ encoding: 'ascii', bomLength: 0 });
  });

  it('does not mistake a UTF-8 character cut at the end of the window for invalid UTF-8', () => {
    const window = Buffer.from(`${'a'.repeat(SNIFF_BYTES - 1)}電`).subarray(0, SNIFF_BYTES);
    expect(sniffEncoding(window, false)).toEqual({ encoding: 'utf-8', bomLength: 0 });
    expect(sniffEncoding(window, true)).toEqual({ encoding: 'cp932', bomLength: 0 });
  });

  it('refuses binary files, but tolerates a stray control character', () => {
    expect(sniffEncoding(Buffer.from('phone\n\x00\n'), true)).toEqual({
      notText: 'not a CSV file: it contains NUL bytes (a binary file)',
    });
    const controls = Buffer.from(Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? 0x01 : 0x41)));
    expect(sniffEncoding(controls, true)).toEqual({
      notText: 'not a CSV file: it is full of control characters (a binary file)',
    });
    expect(sniffEncoding(Buffer.from('phone,memo\n090,a\x1ab\n'), true)).toEqual({
      encoding: 'ascii',
      bomLength: 0,
    });
    expect(sniffEncoding(Buffer.from('\ufeff\x00\x00', 'utf16le'), true)).toEqual({
      notText: 'not a CSV file: it contains NUL characters (a binary file)',
    });
  });
});

describe('UTF-16 without a BOM', () => {
  const list = '電話番号,名前\r\n090-1234-5678,一郎\r\n090-1234-5679,山田 一\r\n';

  it('is told by its NUL bytes, in both byte orders, Japanese names and all', () => {
    expect(sniffEncoding(Buffer.from(list, 'utf16le'), true)).toEqual({ encoding: 'utf-16le', bomLength: 0 });
    expect(sniffEncoding(Buffer.from(list, 'utf16le').swap16(), true)).toEqual({
      encoding: 'utf-16be',
      bomLength: 0,
    });
    expect(sniffEncoding(Buffer.from('phone\tname\n', 'utf16le'), true)).toEqual({
      encoding: 'utf-16le',
      bomLength: 0,
    });
  });

  it('is told even when most of the text is Japanese (long addresses, few ASCII characters)', () => {
    const row = (i: number) => `0${i},東京都新宿区西新宿二丁目八番一号　都庁第一本庁舎四十五階展望室前広場\n`;
    const text = `電話番号,住所\n${Array.from({ length: 40 }, (_, i) => row(i)).join('')}`;
    const window = Buffer.from(text, 'utf16le').subarray(0, 4096);
    expect(window.filter((byte, i) => i % 2 === 1 && byte === 0).length).toBeLessThan(4096 / 2 / 4);
    expect(sniffEncoding(Buffer.from(text, 'utf16le'), true)).toEqual({ encoding: 'utf-16le', bomLength: 0 });
    expect(sniffEncoding(Buffer.from(text, 'utf16le').swap16(), true)).toEqual({
      encoding: 'utf-16be',
      bomLength: 0,
    });
  });

  it('is not what a binary file or a stray NUL looks like: those are still refused', () => {
    const nul = { notText: 'not a CSV file: it contains NUL bytes (a binary file)' };
    // Little-endian 32-bit integers: NULs in pairs (U+0000).
    const ints = Buffer.alloc(400);
    for (let i = 0; i < 100; i++) ints.writeUInt32LE(0x41 + (i % 26), i * 4);
    expect(sniffEncoding(ints, true)).toEqual(nul);
    // Random bytes with their NULs.
    const random = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7919 + ((i * i) % 251)) % 256);
    expect(sniffEncoding(random, true)).toEqual(nul);
    // A text file with a NUL or two.
    expect(sniffEncoding(Buffer.from('phone,name\n090-1234-5678,A\x00\n\x00'), true)).toEqual(nul);
  });

  it('is read as text only if it decodes to text', () => {
    const controls = Buffer.from(`phone\n${'a\x01'.repeat(20)}\n`, 'utf16le');
    expect(sniffEncoding(controls, true)).toEqual({
      notText: 'not a CSV file: it is full of control characters (a binary file)',
    });
  });
});

describe('UTF-8 or Shift_JIS half-width katakana', () => {
  const cp932 = (text: string) => iconv.encode(text, 'cp932');

  it('reads valid-UTF-8 half-width katakana as Shift_JIS, whose UTF-8 reading is Cyrillic or Latin-1 letters', () => {
    expect(isUtf8(cp932('ﾐｶ'))).toBe(true); // ж: what made such files UTF-8 before
    expect(utf8OrCp932(cp932('090-1111-0001,ﾐｶ,ﾃｽﾄｰ\r\n'))).toBe('cp932');
    expect(utf8OrCp932(cp932('ﾅｵ'))).toBe('cp932');
    expect(utf8OrCp932(cp932('ﾃｽﾄ'))).toBe('cp932'); // C3 BD C4: not valid UTF-8 anyway
    // The one ambiguous case: a file whose only non-ASCII text is a lone accented letter in a
    // cell of its own (C3 A9: 'é' or 'ﾃｩ') is taken as CP932, as a lone 'ﾐｶ' is.
    expect(utf8OrCp932(Buffer.from('090-1111-0001,é\r\n'))).toBe('cp932');
    expect(sniffEncoding(cp932('phone,name\r\n090-1111-0001,ﾐｶ\r\n'), true)).toEqual({
      encoding: 'cp932',
      bomLength: 0,
    });
  });

  it('keeps a mostly-UTF-8 file UTF-8 when a field is cut inside a character, and rejects only that row', async () => {
    const cut = Buffer.from('佐藤').subarray(0, 5); // 佐 and two of 藤's three bytes
    const file = Buffer.concat([
      Buffer.from('phone,name\n090-1111-2222,山田花子\n090-1111-3333,'),
      cut,
      Buffer.from('\n090-1111-4444,鈴木一郎\n'),
    ]);
    expect(utf8OrCp932(file)).toBe('utf-8');
    expect(sniffEncoding(file, true)).toEqual({ encoding: 'utf-8', bomLength: 0 });
    const { result, tasks, entries } = await ingestBytes(file);
    expect(tasks.map((t) => [t.row, t.name])).toEqual([
      [2, '山田花子'],
      [4, '鈴木一郎'],
    ]);
    expect(entries).toEqual([
      expect.objectContaining({ row: 3, outcome: 'rejected', code: 'bad-encoding', column: 'name' }),
    ]);
    expect(result.counts).toMatchObject({ accepted: 2, rejected: 1 });
    // Too little UTF-8 to outweigh the break: read as CP932, as before.
    expect(utf8OrCp932(Buffer.concat([Buffer.from('090-1111-3333,山田,'), cut]))).toBe('cp932');
    // Shift_JIS Japanese stays Shift_JIS: its kanji and kana are not UTF-8 at all.
    for (const text of [
      '090-1111-0001,山田太郎,東京都千代田区\r\n',
      'ﾔﾏﾀﾞ ﾀﾛｳ,ｶﾌﾞｼｷｶﾞｲｼｬ',
      'あいうえお、かきくけこ',
    ]) {
      expect([text, utf8OrCp932(cp932(text))]).toEqual([text, 'cp932']);
    }
  });

  it('keeps UTF-8 for accented letters inside Latin words, symbols such as ¥, and any 3-byte character', () => {
    for (const text of ['José', 'Zoë', 'Müller', 'ñandú', '¥1000', '25°C', 'ﾐｶ 東京', 'crème brûlée']) {
      expect([text, utf8OrCp932(Buffer.from(text))]).toEqual([text, 'utf-8']);
    }
  });

  it('decides the same way on a first non-ASCII record found after the first 64 KiB', () => {
    const decoder = makeCellDecoder('ascii');
    expect(decoder.decodeRecord(['090-1111-0001', latin1(cp932('ﾐｶ')), latin1(cp932('ﾃｽﾄｰ'))])).toEqual([
      '090-1111-0001',
      'ﾐｶ',
      'ﾃｽﾄｰ',
    ]);
    expect(decoder.encoding).toBe('cp932');
  });
});

describe('makeCellDecoder', () => {
  it('decides between UTF-8 and CP932 on the first record with non-ASCII bytes', () => {
    const sjis = makeCellDecoder('ascii');
    expect(sjis.decodeRecord(['090', 'abc'])).toEqual(['090', 'abc']);
    expect(sjis.encoding).toBe('ascii');
    expect(sjis.decodeRecord(['090', latin1(iconv.encode('山田', 'cp932'))])).toEqual(['090', '山田']);
    expect(sjis.encoding).toBe('cp932');

    const utf8 = makeCellDecoder('ascii');
    expect(utf8.decodeRecord([latin1(Buffer.from('山田'))])).toEqual(['山田']);
    expect(utf8.encoding).toBe('utf-8');
  });
});

describe('files whose first 64 KiB are plain ASCII', () => {
  it('a Shift_JIS list with Japanese only after 64 KiB still decodes the Japanese', async () => {
    const rows = Array.from({ length: 4000 }, (_, i) => `090-1${String(i).padStart(3, '0')}-0000,Name ${i}`);
    const text = `phone,name\r\n${rows.join('\r\n')}\r\n090-9999-0000,山田 花子\r\n`;
    expect(text.indexOf('山')).toBeGreaterThan(SNIFF_BYTES);
    const { result, tasks } = await ingestBytes(iconv.encode(text, 'cp932'), { chunkSize: 4096 });
    expect(result).toMatchObject({ status: 'completed', encoding: 'cp932' });
    expect(tasks.at(-1)).toEqual({ row: 4002, recipient: '+819099990000', name: '山田 花子', variables: {} });
  });
});
