/**
 * Properties of ingestRows over generated input:
 * - any bytes at all: it resolves (never throws), counts add up, no task comes from a reported row;
 * - well-formed lists in every encoding, separated by commas, tabs or semicolons, with random
 *   headers (and empty header cells at the end), cells, blank rows, ragged rows, rows ending in
 *   extra empty cells, valid/invalid/duplicate/opted-out numbers: the outcome of every row is the
 *   one an independent oracle predicts, and pausing anywhere then resuming gives the same result
 *   as one pass.
 */
import fc from 'fast-check';
import iconv from 'iconv-lite';
import { describe, expect, it } from 'vitest';
import { inMemoryDuplicateFilter } from '#shared/csv/duplicates.ts';
import { type IngestCursor, type IngestResult, ingestRows, type TaskDraft } from '#shared/csv/read-list.ts';
import { normalizePhoneNumber } from '#shared/csv/recipients.ts';
import type { ReportEntry } from '#shared/csv/report.ts';
import { chunked } from './support.ts';

interface Outcome {
  readonly result: IngestResult;
  readonly tasks: TaskDraft[];
  readonly entries: ReportEntry[];
}

async function run(
  bytes: Uint8Array,
  options: {
    chunkSize: number;
    batchSize: number;
    optedOut?: ReadonlySet<string>;
    pauses?: readonly boolean[];
  },
): Promise<Outcome> {
  const tasks: TaskDraft[] = [];
  const entries: ReportEntry[] = [];
  const duplicates = inMemoryDuplicateFilter();
  const pauses = [...(options.pauses ?? [])];
  let cursor: IngestCursor | undefined;
  for (;;) {
    const from = cursor && cursor.byteOffset > 0 ? cursor.byteOffset : 0;
    const result = await ingestRows({
      source: chunked(bytes.subarray(from), options.chunkSize),
      channel: 'call',
      defaultRegion: 'JP',
      duplicates,
      batchSize: options.batchSize,
      ...(cursor ? { resumeFrom: cursor } : {}),
      shouldPause: () => pauses.shift() ?? false,
      isOptedOut: async (recipients) => new Set(recipients.filter((r) => options.optedOut?.has(r))),
      onBatch: async (page) => {
        tasks.push(...page);
      },
      onReport: async (page) => {
        entries.push(...page);
      },
    });
    if (result.status !== 'paused') return { result, tasks, entries };
    cursor = JSON.parse(JSON.stringify(result.cursor)) as IngestCursor;
  }
}

function expectConsistent({ result, tasks, entries }: Outcome): void {
  const { counts } = result;
  expect(counts.accepted + counts.rejected + counts.skipped).toBe(counts.dataRows);
  expect(tasks).toHaveLength(counts.accepted);
  expect(entries.filter((e) => e.outcome === 'rejected')).toHaveLength(counts.rejected);
  expect(entries.filter((e) => e.outcome === 'skipped')).toHaveLength(counts.skipped);
  const rows = [...tasks.map((t) => t.row), ...entries.map((e) => e.row)];
  expect(new Set(rows).size).toBe(rows.length); // no row is both a task and reported, or reported twice
  for (const task of tasks) expect(task.recipient).toMatch(/^\+[1-9]\d{6,14}$/);
  if (result.status === 'failed') expect(result.failure.reason).not.toBe('');
}

describe('ingestRows on arbitrary bytes', () => {
  const settings = {
    chunkSize: fc.integer({ min: 1, max: 300 }),
    batchSize: fc.integer({ min: 1, max: 40 }),
  };

  it('never throws and keeps its counts consistent', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 3000 }),
        settings.chunkSize,
        settings.batchSize,
        async (bytes, c, b) => {
          const outcome = await run(bytes, { chunkSize: c, batchSize: b });
          expect(outcome.result.status).not.toBe('paused');
          expectConsistent(outcome);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never throws on garbage after a good header, in any encoding prefix', async () => {
    const prefix = fc.constantFrom(
      Buffer.from('phone,name\n'),
      Buffer.from('\ufeff電話番号,氏名\r\n'),
      iconv.encode('電話番号,氏名\r\n', 'cp932'),
      Buffer.from('\ufeffphone,name\n', 'utf16le'),
    );
    const body = fc.array(
      fc.oneof(
        fc.uint8Array({ maxLength: 40 }),
        fc.constantFrom('"', ',', '\r', '\n', '\r\n', '090-1234-5678', '０９０', '""', '"a\nb"'),
      ),
      { maxLength: 80 },
    );
    await fc.assert(
      fc.asyncProperty(prefix, body, settings.chunkSize, settings.batchSize, async (head, parts, c, b) => {
        const bytes = Buffer.concat([
          head,
          ...parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)),
        ]);
        expectConsistent(await run(bytes, { chunkSize: c, batchSize: b }));
      }),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Well-formed lists with an oracle.

/** Distinct valid JP mobile numbers (090/080/070, first subscriber digit 1-9). */
const POOL = Array.from({ length: 12 }, (_, i) => ({
  national: `0${[9, 8, 7][i % 3]}0${1 + (i % 9)}${String(1000000 + i * 7919).slice(-7)}`,
}));
const e164 = (national: string): string => `+81${national.slice(1)}`;

const FORMATS: ((national: string) => string)[] = [
  (n) => n,
  (n) => `${n.slice(0, 3)}-${n.slice(3, 7)}-${n.slice(7)}`,
  (n) => `+81 ${n.slice(1, 3)} ${n.slice(3, 7)} ${n.slice(7)}`,
  (n) => `81${n.slice(1)}`,
  (n) => n.replace(/\d/g, (d) => String.fromCharCode(0xff10 + Number(d))),
  (n) => `(${n.slice(0, 3)}) ${n.slice(3, 7)}-${n.slice(7)}`,
  (n) => ` ${n.slice(1)} `, // lost leading zero
];

type PhoneCell =
  | { readonly kind: 'valid'; readonly text: string; readonly recipient: string }
  | { readonly kind: 'invalid'; readonly text: string; readonly code: string };

const INVALID: readonly [string, string][] = [
  ['', 'phone-empty'],
  ['   ', 'phone-empty'],
  ['abc', 'invalid-phone'],
  ['090-1234-567', 'invalid-phone'],
  ['12', 'invalid-phone'],
  ['9.01235E+10', 'phone-scientific-notation'],
  ['090-1234-5678 内線', 'invalid-phone'],
];

const phoneCell: fc.Arbitrary<PhoneCell> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(fc.nat(POOL.length - 1), fc.nat(FORMATS.length - 1)).map(([p, f]): PhoneCell => {
      const { national } = POOL[p]!;
      return { kind: 'valid', text: FORMATS[f]!(national), recipient: e164(national) };
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(...INVALID)
      .map(([text, code]): PhoneCell => ({ kind: 'invalid', text, code })),
  },
);

const SJIS_CHARS = [..."abcXYZ019 -_.!?#=+@'あいう漢字カナー①㈱\u3000", ',', '"', '\n', '\r\n', '\t'];
// An accented letter comes inside a Latin word ('José'), as in real lists: a file whose only
// non-ASCII text is a lone 'é' (C3 A9) reads as well as CP932's half-width 'ﾃｩ', and
// utf8OrCp932 documents that it takes CP932 then (see encoding.test.ts).
const UNICODE_CHARS = ['😀', 'José', '\u00a0'];
const cellText = (unicode: boolean) =>
  fc
    .array(fc.constantFrom(...SJIS_CHARS, ...(unicode ? UNICODE_CHARS : [])), { maxLength: 8 })
    .map((chars) => chars.join(''));

type Encoding = 'utf-8' | 'utf-8-bom' | 'cp932' | 'utf-16le' | 'utf-16be-no-bom';

interface GeneratedRow {
  readonly phone: PhoneCell;
  readonly others: readonly string[];
  readonly ragged: boolean;
  /** Empty cells after the row's last one (Excel's used range wider than the header). */
  readonly extraEmpty: number;
  readonly blankBefore: boolean;
}

interface GeneratedList {
  readonly encoding: Encoding;
  readonly delimiter: ',' | '\t' | ';';
  readonly newline: '\n' | '\r\n';
  readonly phoneAt: number;
  readonly phoneHeader: string;
  readonly otherHeaders: readonly string[];
  /** Empty cells at the end of the header row. */
  readonly emptyHeaders: number;
  readonly rows: readonly GeneratedRow[];
  readonly optedOut: ReadonlySet<string>;
}

const generatedList: fc.Arbitrary<GeneratedList> = fc
  .record({
    encoding: fc.constantFrom<Encoding>('utf-8', 'utf-8-bom', 'cp932', 'utf-16le', 'utf-16be-no-bom'),
    delimiter: fc.constantFrom<',' | '\t' | ';'>(',', '\t', ';'),
    emptyHeaders: fc.integer({ min: 0, max: 3 }).map((n) => (n === 3 ? 2 : n === 2 ? 1 : 0)),
    newline: fc.constantFrom<'\n' | '\r\n'>('\n', '\r\n'),
    phoneHeader: fc.constantFrom(
      '電話番号',
      'TEL',
      'phone_number',
      'ＰＨＯＮＥ',
      '携帯電話番号',
      ' Phone Number ',
    ),
    otherCount: fc.integer({ min: 0, max: 3 }),
    phoneAtSeed: fc.nat(),
    optedOut: fc.subarray(
      POOL.map((p) => e164(p.national)),
      { maxLength: 3 },
    ),
  })
  .chain((base) => {
    const unicode = base.encoding !== 'cp932';
    const row = fc.record({
      phone: phoneCell,
      others: fc.array(cellText(unicode), { minLength: base.otherCount, maxLength: base.otherCount }),
      ragged: fc.integer({ min: 0, max: 9 }).map((n) => n < 1),
      extraEmpty: fc.integer({ min: 0, max: 9 }).map((n) => (n < 7 ? 0 : n - 6)),
      blankBefore: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
    });
    return fc
      .record({
        headers: fc.array(cellText(unicode), { minLength: base.otherCount, maxLength: base.otherCount }),
        rows: fc.array(row, { maxLength: 40 }),
      })
      .map(({ headers, rows }) => ({
        encoding: base.encoding,
        delimiter: base.delimiter,
        newline: base.newline,
        phoneAt: base.phoneAtSeed % (base.otherCount + 1),
        phoneHeader: base.phoneHeader,
        otherHeaders: headers.map((h, i) => `x${i}_${h}`),
        emptyHeaders: base.emptyHeaders,
        rows,
        optedOut: new Set(base.optedOut),
      }));
  });

/** A cell as a spreadsheet writes it: quoted when it holds the separator, a quote or a line break. */
function csvCell(text: string, delimiter: string, forceQuote: boolean): string {
  return forceQuote || /["\r\n]/.test(text) || text.includes(delimiter) || text !== text.trim()
    ? `"${text.replaceAll('"', '""')}"`
    : text;
}

function render(list: GeneratedList): { bytes: Buffer; expected: Expected } {
  const line = (cells: readonly string[]) =>
    cells.map((cell, i) => csvCell(cell, list.delimiter, i % 2 === 1)).join(list.delimiter);
  const empties = (n: number): string[] => Array.from({ length: n }, () => '');
  const withPhone = (phone: string, others: readonly string[]) => {
    const cells = [...others];
    cells.splice(list.phoneAt, 0, phone);
    return cells;
  };
  const headers = withPhone(list.phoneHeader, list.otherHeaders);
  const lines = [line([...headers, ...empties(list.emptyHeaders)])];
  const expected: Expected = { tasks: [], entries: new Map() };
  const firstRow = new Map<string, number>();
  for (const row of list.rows) {
    if (row.blankBefore) lines.push('');
    let cells = withPhone(row.phone.text, row.others);
    if (row.ragged) cells = cells.slice(0, -1);
    // Only where the header shows the separator: a one-cell header row cannot tell `090…;` apart
    // from a one-column file's cell (the header row decides the separator).
    else if (headers.length + list.emptyHeaders > 1) cells = [...cells, ...empties(row.extraEmpty)];
    lines.push(line(cells));
    const spreadsheetRow = lines.length;
    if (cells.every((cell) => cell.trim() === '')) continue; // blank: not a data row
    if (row.ragged) {
      expected.entries.set(spreadsheetRow, { code: 'ragged-row' });
      continue;
    }
    if (row.phone.kind === 'invalid') {
      expected.entries.set(spreadsheetRow, { code: row.phone.code });
      continue;
    }
    const { recipient } = row.phone;
    const first = firstRow.get(recipient);
    if (list.optedOut.has(recipient)) expected.entries.set(spreadsheetRow, { code: 'opted-out' });
    else if (first !== undefined) {
      expected.entries.set(spreadsheetRow, { code: 'duplicate', reason: `duplicate of row ${first}` });
    } else {
      firstRow.set(recipient, spreadsheetRow);
      const variables = Object.fromEntries(
        list.otherHeaders.map((h, i) => [h.trim(), row.others[i]!.trim()]),
      );
      expected.tasks.push({ row: spreadsheetRow, recipient, variables });
    }
  }
  const text = lines.join(list.newline) + list.newline;
  const bytes =
    list.encoding === 'cp932'
      ? iconv.encode(text, 'cp932')
      : list.encoding === 'utf-16le'
        ? Buffer.from(`\ufeff${text}`, 'utf16le')
        : list.encoding === 'utf-16be-no-bom'
          ? Buffer.from(text, 'utf16le').swap16()
          : Buffer.from(list.encoding === 'utf-8-bom' ? `\ufeff${text}` : text);
  if (list.encoding === 'utf-16be-no-bom' && text.replace(/[^\t\n\r\x20-\x7e]/g, '').length < 4) {
    return { bytes, expected: { ...expected, tooLittleAsciiForUtf16: true } };
  }
  return { bytes, expected };
}

interface Expected {
  readonly tasks: TaskDraft[];
  readonly entries: Map<number, { readonly code: string; readonly reason?: string }>;
  readonly tooLittleAsciiForUtf16?: boolean;
}

describe('ingestRows on well-formed lists', () => {
  it('the pool of numbers is valid (sanity of the generator, not of the code under test)', () => {
    for (const { national } of POOL) {
      for (const format of FORMATS) {
        expect(normalizePhoneNumber(format(national), 'JP')).toEqual({ ok: true, recipient: e164(national) });
      }
    }
  });

  it('gives every row the outcome the oracle predicts, in every encoding, however chunked and paused', async () => {
    await fc.assert(
      fc.asyncProperty(
        generatedList,
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.boolean(), { maxLength: 20 }),
        async (list, chunkSize, batchSize, pauses) => {
          const { bytes, expected } = render(list);
          const onePass = await run(bytes, { chunkSize, batchSize, optedOut: list.optedOut });
          expectConsistent(onePass);
          if (expected.tooLittleAsciiForUtf16) {
            // UTF-16 without a BOM and fewer than 4 ASCII characters (line breaks included), all
            // else Japanese: no more telling than a text file with a stray NUL (see guessUtf16).
            expect(onePass.result).toMatchObject({ status: 'failed', failure: { code: 'not-csv' } });
            return;
          }
          expect(onePass.tasks).toEqual(expected.tasks);
          expect(
            new Map(
              onePass.entries.map((e) => [
                e.row,
                { code: e.code, ...(e.code === 'duplicate' ? { reason: e.reason } : {}) },
              ]),
            ),
          ).toEqual(expected.entries);
          const dataRows = expected.tasks.length + expected.entries.size;
          if (dataRows === 0) {
            expect(onePass.result).toMatchObject({ status: 'failed', failure: { code: 'no-data-rows' } });
          } else if (expected.tasks.length === 0) {
            expect(onePass.result).toMatchObject({ status: 'failed', failure: { code: 'no-usable-rows' } });
          } else {
            expect(onePass.result.status).toBe('completed');
          }

          const resumed = await run(bytes, { chunkSize, batchSize, optedOut: list.optedOut, pauses });
          expect(resumed).toEqual(onePass);
        },
      ),
      { numRuns: 250 },
    );
  });
});
