import { describe, expect, it } from 'vitest';
import type { JobView } from '#shared/jobs/api.ts';
import { apiErrorOf, networkErrorOf } from '../../../scripts/ops/api.ts';
import { describeError, UsageError } from '../../../scripts/ops/errors.ts';
import {
  bar,
  bytes,
  callingHoursLine,
  displayWidth,
  doneLine,
  formatClient,
  formatIngestResult,
  formatJobTable,
  formatOptOuts,
  progressLine,
  table,
  uploadLine,
} from '../../../scripts/ops/format.ts';
import { Terminal, withoutQueries } from '../../../scripts/ops/terminal.ts';

function job(overrides: Partial<JobView> = {}): JobView {
  return {
    clientId: 'acme',
    jobId: '01JOB',
    name: 'June calls',
    channel: 'call',
    scenarioId: 'default',
    status: 'running',
    maxAttempts: 3,
    retryDelaySeconds: 1800,
    source: { bucket: 'b', key: 'k' },
    startAt: '2026-11-20T00:00:00.000Z',
    createdAt: '2026-11-20T00:00:00.000Z',
    updatedAt: '2026-11-20T00:01:00.000Z',
    counts: {
      rows: 1234,
      rejected: 2,
      skipped: 1,
      tasks: 1231,
      completed: 600,
      failed: 15,
      cancelled: 0,
      outstanding: 616,
    },
    ...overrides,
  } as JobView;
}

describe('ops output', () => {
  it('draws bars and sizes', () => {
    expect(bar(0.5, 10)).toBe('█████░░░░░');
    expect(bar(2, 4)).toBe('████');
    expect(bar(Number.NaN, 4)).toBe('░░░░');
    expect(bytes(900)).toBe('900 B');
    expect(bytes(2_200)).toBe('2.1 KB');
    expect(bytes(5 * 1024 ** 2)).toBe('5.0 MB');
    expect(bytes(300 * 1024 ** 2)).toBe('300 MB');
    expect(uploadLine('list.csv', 512 * 1024, 1024 * 1024, 1000)).toBe(
      'uploading list.csv ▕██████████░░░░░░░░░░▏ 50%  512 KB of 1.0 MB, 512 KB/s',
    );
  });

  it('writes calling hours with alike days together', () => {
    const day = [{ start: '09:00', end: '18:00' }];
    expect(callingHoursLine({ mon: day, tue: day, wed: day, thu: day, fri: day })).toBe(
      'mon–fri 09:00–18:00 · sat–sun closed',
    );
    expect(callingHoursLine({ mon: day, sat: [...day, { start: '20:00', end: '02:00' }] })).toBe(
      'mon 09:00–18:00 · tue–fri closed · sat 09:00–18:00, 20:00–02:00 · sun closed',
    );
    expect(callingHoursLine({})).toBe('never open');
  });

  it("shows a client's settings, paused or not", () => {
    const text = formatClient({
      clientId: 'acme',
      maxConcurrentCalls: 1200,
      callsPerSecond: 2,
      timeZone: 'Asia/Tokyo',
      callingHours: { timeZone: 'Asia/Tokyo', weekly: { mon: [{ start: '09:00', end: '18:00' }] } },
      defaultRegion: 'JP',
      paused: true,
      telephony: {
        provider: 'twilio',
        accountSid: 'AC1',
        from: '+81300000000',
        voiceUrl: 'https://v.example',
      },
      updatedAt: Date.parse('2026-11-20T00:00:00Z'),
    });
    expect(text).toBe(
      [
        'client:           acme (PAUSED: nothing of it starts)',
        'concurrent calls: 1,200',
        'calls per second: 2',
        'time zone:        Asia/Tokyo',
        'calling hours:    mon 09:00–18:00 · tue–sun closed',
        'default region:   JP',
        'telephony:        twilio (accountSid=AC1, from=+81300000000, voiceUrl=https://v.example)',
        'updated:          2026-11-20T00:00:00.000Z',
      ].join('\n'),
    );
  });

  it("puts a job's progress on one line: status, bar, counts, outstanding and what it waits for", () => {
    expect(progressLine(job())).toBe(
      'running   ▕██████░░░░░░▏ 49% · 615/1,231 ended (600 completed, 15 failed) · 616 outstanding',
    );
    expect(
      progressLine(
        job({
          waiting: { reason: 'concurrent-limit', message: "6 calls in flight, the client's limit" },
        }),
      ),
    ).toMatch(/ · waiting: 6 calls in flight, the client's limit$/);
    const none = { ...job().counts, completed: 0, failed: 0, outstanding: 1231 };
    expect(progressLine(job({ status: 'scheduled', counts: none }))).toBe(
      'scheduled ▕░░░░░░░░░░░░▏  0% · 0/1,231 ended · 1,231 outstanding',
    );
    expect(progressLine(job({ status: 'uploading' }))).toBe('uploading: waiting for the list to arrive');
    expect(progressLine(job({ status: 'validating' }))).toBe(
      'validating: 1,234 rows: 1,231 tasks, 2 rejected, 1 skipped so far',
    );
    const counts = {
      ...job().counts,
      completed: 1200,
      failed: 20,
      cancelled: 1,
      expired: 10,
      outstanding: 0,
    };
    expect(doneLine(job({ status: 'completed', counts }))).toBe(
      'job 01JOB completed: 1,200 completed, 20 failed, 1 cancelled, 10 expired of 1,231 tasks (1,234 rows, 2 rejected, 1 skipped)',
    );
    expect(doneLine(job({ status: 'failed', failureReason: 'not a CSV file: it is a PDF' }))).toMatch(
      /^job 01JOB failed: not a CSV file: it is a PDF: /,
    );
  });

  it("lists jobs in a table, with the next page's token", () => {
    const empty = {
      rows: 0,
      rejected: 0,
      skipped: 0,
      tasks: 0,
      completed: 0,
      failed: 0,
      cancelled: 0,
      outstanding: 0,
    };
    expect(
      formatJobTable(
        [job(), job({ jobId: '01OTHER', status: 'completed', counts: empty as JobView['counts'] })],
        'tok',
      ),
    ).toBe(
      [
        'JOB      NAME        CHANNEL  STATUS     PROGRESS              CREATED',
        '01JOB    June calls  call     running    █████░░░░░ 615/1,231  2026-11-20T00:00:00.000Z',
        '01OTHER  June calls  call     completed  ██████████ 0/0        2026-11-20T00:00:00.000Z',
        'more: --next tok',
      ].join('\n'),
    );
    expect(formatJobTable([])).toBe('no jobs');
  });

  it('aligns Japanese text by the columns it takes', () => {
    expect(displayWidth('電話番号')).toBe(8);
    expect(displayWidth('ｶﾀｶﾅ')).toBe(4);
    expect(
      table([
        ['COLUMN', 'X'],
        ['電話番号', 'y'],
      ]),
    ).toBe('COLUMN    X\n電話番号  y');
  });

  it("shows the ingest's result: counts, then the rejected and skipped rows, and how many more", () => {
    const text = formatIngestResult(job({ status: 'scheduled' }), [
      { row: 11, outcome: 'rejected', column: '電話番号', reason: 'invalid phone number', value: '090-1234' },
      {
        row: 21,
        outcome: 'skipped',
        column: '電話番号',
        reason: 'duplicate of row 2',
        value: '090-1000-5000',
      },
    ]);
    expect(text).toBe(
      [
        'list read: 1,234 rows: 1,231 tasks, 2 rejected, 1 skipped',
        'ROW  OUTCOME   COLUMN    REASON                VALUE',
        '11   rejected  電話番号  invalid phone number  090-1234',
        '21   skipped   電話番号  duplicate of row 2    090-1000-5000',
        "… and 1 more in the job's report (jobs report)",
      ].join('\n'),
    );
  });

  it('shows opt-outs, and recipients never opted out', () => {
    expect(
      formatOptOuts({
        optOuts: [
          {
            recipient: '+819012345678',
            input: '090-1234-5678',
            optedOut: true,
            since: '2026-11-20T00:00:00.000Z',
          },
          { recipient: 'U1', optedOut: false },
        ],
        next: 'n1',
      }),
    ).toBe(
      [
        'RECIPIENT      OPTED OUT  SINCE                     AS TYPED',
        '+819012345678  yes        2026-11-20T00:00:00.000Z  090-1234-5678',
        'U1             no         never opted out',
        'more: --next n1',
      ].join('\n'),
    );
    expect(formatOptOuts({ optOuts: [] })).toBe('no opted-out recipients');
  });
});

describe('ops errors', () => {
  it("turns an API error into one line with the API's message and field errors", () => {
    const error = apiErrorOf(
      'POST',
      '/clients/acme/jobs',
      400,
      JSON.stringify({
        message: 'invalid job options',
        fieldErrors: { maxAttempts: ['Too big'], name: ['must not be empty'] },
      }),
    );
    expect(error.message).toBe(
      'POST /clients/acme/jobs: 400 invalid job options — maxAttempts: Too big; name: must not be empty',
    );
    expect(error.status).toBe(400);
    expect(apiErrorOf('GET', '/clients/b', 403, '{"message":"Forbidden"}').message).toMatch(
      /^GET \/clients\/b: 403 Forbidden \(the API refused the signature or this identity may not call the route/,
    );
    expect(apiErrorOf('GET', '/x', 502, '<html>\nBad gateway\n</html>').message).toBe(
      'GET /x: 502 <html> Bad gateway </html> (the API failed: see its logs)',
    );
  });

  it('names only the host of a URL it could not reach', () => {
    const refused = Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    const url = new URL('https://bucket.s3.example/uploads/k?X-Amz-Signature=secret');
    expect(networkErrorOf(refused, url, false).message).toBe(
      'cannot reach https://bucket.s3.example: connection refused',
    );
    expect(networkErrorOf(refused, new URL('http://127.0.0.1:3000/clients/a'), true).message).toBe(
      'cannot reach http://127.0.0.1:3000: connection refused (is npm start still running?)',
    );
    expect(withoutQueries('PUT https://b.example/k?X-Amz-Signature=abc failed')).toBe(
      'PUT https://b.example/k?… failed',
    );
  });

  it('gives each kind of error its exit status', () => {
    expect(describeError(new UsageError('bad'))).toEqual({ line: 'bad', exitCode: 2 });
    const credentials = Object.assign(new Error('Could not load credentials from any providers'), {
      name: 'CredentialsProviderError',
    });
    expect(describeError(credentials).line).toMatch(
      /^no usable AWS credentials: Could not load credentials from any providers \(set AWS_PROFILE/,
    );
    expect(describeError(credentials).exitCode).toBe(1);
  });
});

describe('ops terminal', () => {
  it('writes one line per change of the live line when stderr is not a terminal', () => {
    const out: string[] = [];
    const err: string[] = [];
    const term = new Terminal({ write: (t: string) => out.push(t) }, { write: (t: string) => err.push(t) });
    term.live('a');
    term.live('a');
    term.live('uploading 10%', { transient: true });
    term.live('b');
    term.print('result');
    term.error('GET https://x.example/r?sig=1: 500');
    expect(err).toEqual(['a\n', 'b\n', 'error: GET https://x.example/r?… 500\n']);
    expect(out).toEqual(['result\n']);
  });

  it('redraws the live line in place on a terminal, cut to its width', () => {
    const err: string[] = [];
    const term = new Terminal(
      { write: () => {} },
      { write: (t: string) => err.push(t), isTTY: true, columns: 21 },
    );
    term.live('x'.repeat(30));
    term.endLive();
    expect(err).toEqual([`\r\x1b[2K${'x'.repeat(19)}…`, '\n']);
  });
});
