/**
 * Writes the CSV fixtures of test/fixtures/csv/: real customer-style exports whose exact bytes
 * matter (Shift_JIS, BOMs, CRLF, binary files renamed .csv), so they are generated here rather
 * than typed in an editor that might re-encode them. Run: `npm exec -- node scripts/make-csv-fixtures.ts`.
 * The generated files are committed; test/unit/csv/fixtures.test.ts holds the report each must produce.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import iconv from 'iconv-lite';

const dir = join(import.meta.dirname, '..', 'test', 'fixtures', 'csv');
mkdirSync(dir, { recursive: true });

const crlf = (lines: string[]): string => lines.map((line) => `${line}\r\n`).join('');
const lf = (lines: string[]): string => lines.map((line) => `${line}\n`).join('');
const write = (name: string, bytes: Uint8Array | string): void => writeFileSync(join(dir, name), bytes);

// Excel's "CSV" on Japanese Windows: CP932 (incl. NEC extensions like ㈱ and ①), CRLF.
write(
  'sjis-japanese-headers.csv',
  iconv.encode(
    crlf([
      '電話番号,お名前,会社名,メモ',
      '090-1234-5678,山田 太郎,山田商店,初回のお客様',
      '０８０－１１１１－２２２２,鈴木 花子,㈱ＡＢＣ,全角の番号①',
      '03-1234-5678,佐藤 一郎,佐藤工業,固定電話',
      '9012340000,高橋 次郎,,Excelで先頭の0が消えた番号',
      '090-1234-5678,山田 太郎（重複）,山田商店,',
      '080-9999-0000,伊藤 三郎,,配信停止済み',
      '090-123-456,渡辺 四郎,,桁が足りない',
      ',名無し,,番号なし',
    ]),
    'cp932',
  ),
);

// Excel's "CSV UTF-8": a BOM, English headers, Japanese values.
write(
  'utf8-bom.csv',
  `\ufeff${lf([
    'Phone Number,Name,Plan',
    '+81 90 2222 3333,Alice,gold',
    '(090) 2222-4444,Bob,silver',
    '+1 415 555 2671,Carol,gold',
    'not a number,Dave,bronze',
    '090-2222-5555,山本 五郎,ゴールド',
  ])}`,
);

// CRLF, quoted cells with commas, doubled quotes and line breaks; the last line has no CRLF.
write(
  'crlf-quoted.csv',
  `${crlf([
    'phone,name,address,note',
    '090-3333-0001,"Tanaka, Ichiro","1-2-3 Shibuya, Tokyo","says ""hello"""',
    '090-3333-0002,Sato,"Line one\r\nLine two\r\nLine three",multi-line address',
    '090-3333-0003,Ito,"=HYPERLINK(""http://example.com"")",looks like a formula',
    '"090-3333-0003","Ito, again",,',
    '090-3333-0004,Kato,"a,b",c,extra',
    '090-3333-0005,Endo,,,',
  ])}090-3333-0006,Last,"no line break, at the end",fin`,
);

// Blank lines everywhere: before the header, between rows, ",," rows Excel leaves below the
// data, whitespace-only rows, and trailing blank lines.
write(
  'blank-lines.csv',
  lf([
    '',
    'TEL,名前',
    '090-4444-0001,一',
    '',
    '',
    '090-4444-0002,二',
    ',',
    '  ,\u3000',
    '090-4444-0003,"三\n\n(blank lines inside quotes)"',
    '',
    '090-4444-0004,四',
    ',',
    ',',
    '',
  ]),
);

// Numbers as customers really write them, most of them wrong, several the same person.
write(
  'invalid-and-duplicates.csv',
  lf([
    '携帯電話番号,氏名',
    '09055550001,正しい',
    'abc,文字',
    '090-5555-001,桁不足',
    '9.05555E+09,指数表記',
    ',空欄',
    '１２３４,短すぎる',
    '090-5555-0001 内線12,内線つき',
    '090-5555-0001,重複（ハイフン）',
    '+81 90 5555 0001,重複（国番号）',
    '819055550001,重複（プラスなし）',
    '09055550002',
    '9055550003.0,小数点つき',
    '090-5555-0004,列が多い,余計な値',
  ]),
);

// A PNG image, a zip (an .xlsx is one) and random binary, each renamed .csv.
write(
  'binary-png.csv',
  Uint8Array.from([
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00,
    0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01,
    0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
  ]),
);
write(
  'binary-xlsx.csv',
  Buffer.concat([
    Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00]),
    Buffer.from('[Content_Types].xml'),
    Buffer.alloc(64, 0),
  ]),
);
write(
  'binary-random.csv',
  Uint8Array.from({ length: 512 }, (_, i) => (i * 151 + 17) % 256),
);

write('header-only.csv', crlf(['電話番号,氏名']));
write('no-phone-column.csv', lf(['氏名,住所,メモ', '山田,東京,', '鈴木,大阪,']));
write('no-header.csv', lf(['090-1234-5678,山田', '080-1111-2222,鈴木']));

// A message job's list: LINE user ids.
write(
  'line-user-ids.csv',
  lf([
    'userId,name,coupon',
    'U4af4980629a0b2c7b4c8e2c1f1d0a9e3,佐藤,SPRING10',
    'U4AF4980629A0B2C7B4C8E2C1F1D0A9E3,大文字,SPRING10',
    'user123,不正,SPRING10',
    ',空欄,SPRING10',
    'Ub1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6,鈴木,=1+1',
    'U4af4980629a0b2c7b4c8e2c1f1d0a9e3,佐藤（重複）,SPRING10',
  ]),
);

// The last row opens a quote that is never closed.
write(
  'unclosed-quote.csv',
  lf([
    'phone,name,note',
    '090-6666-0001,One,ok',
    '090-6666-0002,Two,"this quote',
    'never closes',
    '090-6666-0003,Three,x',
  ]),
);

// One row over the 8 KiB row limit.
write(
  'row-too-long.csv',
  lf([
    'phone,name,note',
    '090-7777-0001,One,short',
    `090-7777-0002,Two,${'長'.repeat(3000)}`,
    '090-7777-0003,Three,ok',
  ]),
);

// Excel's "Unicode Text" style UTF-16LE with a BOM (comma-separated here).
write(
  'utf16le-bom.csv',
  Buffer.concat([
    Buffer.from([0xff, 0xfe]),
    Buffer.from(
      crlf(['電話番号,名前', '090-8888-0001,一郎', '090-8888-0002,二郎', 'bad,三郎', '090-8888-0004,四郎']),
      'utf16le',
    ),
  ]),
);

// Excel's "Unicode text" export: UTF-16LE with a BOM, TAB-separated, CRLF; commas stay
// unquoted inside cells, cells with a tab, a line break or a quote are quoted.
write(
  'utf16le-bom-tab.csv',
  Buffer.concat([
    Buffer.from([0xff, 0xfe]),
    Buffer.from(
      crlf([
        '電話番号\t氏名\t住所\tメモ',
        '090-1212-0001\t山田 太郎\t東京都千代田区1-1, 2F\t初回',
        '090-1212-0002\t"鈴木\t花子"\t大阪府, 北区\t"改行\r\nあり"',
        'abc\t不正\t\t',
        '090-1212-0001\t山田（重複）\t\t',
      ]),
      'utf16le',
    ),
  ]),
);

// A .tsv saved as .csv: UTF-8 without a BOM, TAB-separated, LF; a comma inside a cell.
write(
  'tab-separated.csv',
  lf(['phone\tname\tcompany', '090-1313-0001\tAlice\tAcme, Inc.', '090-1313-0002\t佐藤\t"Quoted\tTab"']),
);

// European Excel's "CSV UTF-8": a BOM, semicolons (the comma is the decimal mark), CRLF; the
// header has more commas than semicolons.
write(
  'semicolon-excel-eu.csv',
  `\ufeff${crlf([
    'Phone;Name, Vorname;Betrag, EUR, brutto',
    '090-1414-0001;Müller, Anna;12,50',
    '090-1414-0002;"Schmidt; Hans";7,00',
    '090-1414-0001;Müller, Anna;1,00',
    'keine Nummer;Weber, Eva;0,00',
  ])}`,
);

// Excel's used range wider than its header: `,,` at the end of the header, and data rows
// that end early or carry more empty cells.
write(
  'trailing-empty-header.csv',
  `\ufeff${crlf([
    '電話番号,氏名,メモ,,',
    '090-1515-0001,一,a,,',
    '090-1515-0002,二,b',
    '090-1515-0003,三,c,,,,',
    '090-1515-0004,四',
    '090-1515-0005,五,e,x,',
  ])}`,
);

// UTF-16 without a BOM, as some tools export it, in both byte orders.
const noBomList = crlf(['電話番号,名前', '090-1616-0001,一郎', '090-1616-0002,二郎', 'bad,三郎']);
write('utf16le-no-bom.csv', Buffer.from(noBomList, 'utf16le'));
write('utf16be-no-bom.csv', Buffer.from(noBomList, 'utf16le').swap16());

// Shift_JIS whose only non-ASCII is half-width katakana, every run of it also valid UTF-8:
// ﾐｶ = D0 B6 (ж), ﾅｵ = C5 B5 (ŵ), ﾃｽﾄｰ = C3 BD C4 B0 (ýİ), ﾕｷ = D5 B7 (Armenian).
write(
  'sjis-halfwidth-katakana.csv',
  iconv.encode(
    crlf(['phone,name,kana', '090-1717-0001,ﾐｶ,ﾕｷ', '090-1717-0002,ﾅｵ,ﾃｽﾄｰ', '090-1717-0003,ﾃｽﾄｰ,ﾐｶ']),
    'cp932',
  ),
);

console.log(`wrote fixtures to ${dir}`);
