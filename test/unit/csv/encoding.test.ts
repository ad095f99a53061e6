import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { makeCellDecoder, SNIFF_BYTES, sniffEncoding } from '#shared/csv/encoding.ts';
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
