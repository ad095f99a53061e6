/** Fallback's rules: the job options that name it, where a task goes next, what the report says. */
import { describe, expect, it } from 'vitest';
import { lineOutcome } from '#shared/campaign/line-transport.ts';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { ClaimedTask, TaskOutcome } from '#shared/campaign/ports.ts';
import type { MessageTransport } from '#shared/campaign/transport.ts';
import { NO_IDENTIFIER, nextChannel, triedCell, triedOnLeaving } from '#shared/jobs/fallback.ts';
import type { ClientSettings, Task } from '#shared/jobs/model.ts';
import { contentPlaceholders } from '#shared/jobs/placeholders.ts';
import { jobReportCsv } from '#shared/jobs/report.ts';
import { jobOptionsFromQuery, parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { fieldErrorsOf, TOKYO_CLIENT } from './fakes.ts';

const NOW = Date.parse('2026-11-20T00:00:00Z');
const CONTENT = {
  message: 'お知らせ {{name}}',
  email: { subject: 'お知らせ', text: '{{name}} 様' },
  sms: { body: '{{coupon}}' },
};

describe('a job that falls back', () => {
  const everything: ClientSettings = {
    ...parseClientSettings('acme', TOKYO_CLIENT, NOW),
    messageChannelId: 'C1',
    email: { from: 'news@example.com' },
    sms: { originationIdentity: '+81312345678', partsPerSecond: 1 },
  };

  it('names its channels in order: the first is its channel, the rest its fallback', () => {
    const options = parseJobOptions(
      { name: 'n', channel: ['line', 'email', 'sms'], ...CONTENT },
      everything,
      NOW,
    );
    expect(options).toMatchObject({ channel: 'line', fallback: ['email', 'sms'] });
    // `message` is still `line`; one channel in a list is that channel, with no fallback.
    expect(
      parseJobOptions(
        { name: 'n', channel: ['message', 'sms'], message: CONTENT.message, sms: CONTENT.sms },
        everything,
        NOW,
      ),
    ).toMatchObject({
      channel: 'line',
      fallback: ['sms'],
    });
    const single = parseJobOptions({ name: 'n', channel: ['email'], email: CONTENT.email }, everything, NOW);
    expect(single.channel).toBe('email');
    expect(single).not.toHaveProperty('fallback');
    // An inline upload's query names them with commas.
    expect(jobOptionsFromQuery({ channel: 'line, email,sms' }).channel).toEqual(['line', 'email', 'sms']);
  });

  it('refuses a call in the list, a channel twice, an empty list, and an unknown channel', () => {
    const refusal = (channel: unknown) =>
      fieldErrorsOf(() => parseJobOptions({ name: 'n', channel, ...CONTENT }, everything, NOW)).channel;
    expect(refusal(['call', 'sms'])).toEqual([
      'only message channels (line, email, sms) can fall back: a call job has one channel',
    ]);
    expect(refusal(['sms', 'email', 'sms'])).toEqual(['must name each channel once']);
    expect(refusal([])).toEqual(['must name at least one channel']);
    expect(refusal(['line', 'fax'])).toEqual([
      'must be call, line, email or sms, or a list of the message channels to fall back through',
    ]);
  });

  it("needs each channel's content and the client's settings for it, and no other channel's content", () => {
    const errors = fieldErrorsOf(() =>
      parseJobOptions(
        { name: 'n', channel: ['line', 'sms'], message: CONTENT.message, email: CONTENT.email },
        { ...everything, sms: undefined },
        NOW,
      ),
    );
    expect(errors).toEqual({
      channel: ['SMS needs the client to have SMS settings (an origination identity)'],
      sms: ['SMS needs its text ({ body })'],
      email: ['only an email job sends an email; a job that falls back to it does not'],
    });
  });

  it("fills its placeholders from the list's columns on every channel", () => {
    const options = parseJobOptions(
      { name: 'n', channel: ['line', 'email', 'sms'], ...CONTENT },
      everything,
      NOW,
    );
    expect(contentPlaceholders(options).sort()).toEqual(['coupon', 'name']);
  });
});

describe('where a task goes next', () => {
  const job = { channel: 'line' as const, fallback: ['email', 'sms'] as const };
  const reach = { line: 'Uabc', email: 'a@example.com', sms: '+819012345678' };

  it('is the next channel it has an identifier for, past those it has none for', () => {
    expect(nextChannel(job, { reach })).toEqual({
      from: 'line',
      channel: 'email',
      recipient: 'a@example.com',
      skipped: [],
    });
    const noEmail = nextChannel(job, { reach: { line: 'Uabc', sms: '+819012345678' } })!;
    expect(noEmail).toEqual({
      from: 'line',
      channel: 'sms',
      recipient: '+819012345678',
      skipped: [{ channel: 'email', reason: NO_IDENTIFIER }],
    });
    expect(triedOnLeaving(noEmail, 'opted-out')).toEqual([
      { channel: 'line', reason: 'opted-out' },
      { channel: 'email', reason: NO_IDENTIFIER },
    ]);
    expect(nextChannel(job, { via: 'email', reach })).toMatchObject({ from: 'email', channel: 'sms' });
  });

  it('is none on the last channel, without another identifier, or for a job that does not fall back', () => {
    expect(nextChannel(job, { via: 'sms', reach })).toBeUndefined();
    expect(nextChannel(job, { reach: { line: 'Uabc' } })).toBeUndefined();
    expect(nextChannel({ channel: 'line' }, { reach })).toBeUndefined();
  });

  it('reads as one report cell', () => {
    expect(
      triedCell([
        { channel: 'line', reason: 'opted-out' },
        { channel: 'email', reason: NO_IDENTIFIER },
      ]),
    ).toBe('line: opted-out; email: no-identifier');
    expect(triedCell(undefined)).toBeUndefined();
  });
});

describe("a fallback job's report", () => {
  it('says for each task the channel it is on, its delivery there and what it tried', async () => {
    const base = {
      clientId: 'acme',
      jobId: 'J',
      channel: 'message',
      variables: {},
      readyAt: 0,
      updatedAt: 0,
    } as const;
    const tasks: Task[] = [
      {
        ...base,
        taskId: 'a',
        row: 2,
        recipient: 'Uabc',
        state: 'completed',
        attempts: 1,
        lastResult: 'delivered',
      },
      {
        ...base,
        taskId: 'b',
        row: 3,
        recipient: 'b@example.com',
        via: 'email',
        state: 'completed',
        attempts: 1,
        lastResult: 'accepted',
        deliveryState: 'delivered',
        tried: [{ channel: 'line', reason: 'opted-out' }],
      },
    ];
    let csv = '';
    const rows = (async function* () {
      yield* tasks;
    })();
    for await (const chunk of jobReportCsv((async function* () {})(), rows, {
      channel: 'line',
      fallback: ['email'],
    }))
      csv += Buffer.from(chunk).toString('utf8');
    expect(csv.replace(/^\uFEFF/, '').split('\r\n')).toEqual([
      'row,recipient,outcome,attempts,last_result,reason,column,value,channel,delivery,tried',
      '2,Uabc,completed,1,delivered,,,,line,,',
      '3,b@example.com,completed,1,accepted,,,,email,delivered,line: opted-out',
      '',
    ]);
  });
});

describe("LINE's refusal of a push's recipient", () => {
  it("is the 400 naming 'to', and nothing else", () => {
    const rejected = (message: string, details: { property?: string; message: string }[] = []) =>
      lineOutcome({ kind: 'rejected', status: 400, message, details, requestId: 'r' });
    expect(rejected("The property, 'to', in the request body is invalid (line: -, column: -)")).toMatchObject(
      {
        recipientRefused: true,
      },
    );
    expect(
      rejected('The request body has 1 error(s)', [{ property: 'to', message: 'invalid' }]),
    ).toMatchObject({
      recipientRefused: true,
    });
    expect(
      rejected('The request body has 1 error(s)', [{ property: 'messages[0].text', message: 'too long' }]),
    ).not.toHaveProperty('recipientRefused');
  });
});

describe('the pipeline', () => {
  /** A transport that refuses every recipient as unreachable (as an SMS opt-out is). */
  const refusing: MessageTransport<object, string> = {
    channel: 'sms',
    limits: { recipientsPerRequest: 1, lanes: { sms: 1_000 }, countsRecipients: false },
    idempotent: false,
    acceptedAs: 'accepted',
    groupOf: () => undefined,
    prepare: (unit) => ({ lane: 'sms', request: unit.tasks[0]!.recipient }),
    send: async () => ({
      kind: 'per-recipient',
      requestId: 'r1',
      entries: [
        { kind: 'rejected', lastResult: 'sms-opted-out', reason: 'opted out', unreachable: 'opted-out' },
      ],
    }),
  };
  const task = (taskId: string, over: Partial<ClaimedTask<object>> = {}): ClaimedTask<object> => ({
    jobId: 'J',
    taskId,
    recipient: '+819012345678',
    variables: {},
    template: {},
    attempt: 1,
    attemptStartedAt: NOW,
    ...over,
  });

  async function run(page: ClaimedTask<object>[]): Promise<TaskOutcome[]> {
    const written: TaskOutcome[] = [];
    let given = false;
    await runMessagePipeline<object>({
      source: {
        nextPage: async () => {
          if (given) return [];
          given = true;
          return page;
        },
      },
      report: { write: async (outcomes) => void written.push(...outcomes) },
      batches: { record: async () => {} },
      transport: refusing,
      concurrency: 2,
      queueCapacity: 10,
      clock: { now: () => Date.now() },
      reportIntervalMs: 1,
    });
    return written;
  }

  it('moves a task its channel refuses as unreachable to the next channel, in the attempt it took', async () => {
    const onward = {
      from: 'sms' as const,
      channel: 'email' as const,
      recipient: 'a@example.com',
      skipped: [],
    };
    const [moved, failed, stopped, doubted] = await run([
      task('a', { onward, optOutMovesOn: true }),
      task('b'),
      // A STOP stands for every channel unless the client keeps it to SMS.
      task('c', { onward }),
      // An attempt that may have reached the person never moves on.
      task('d', { onward, optOutMovesOn: true, maybeSent: true }),
    ]).then((all) => ['a', 'b', 'c', 'd'].map((id) => all.find((o) => o.taskId === id)!));
    for (const ended of [stopped, doubted]) expect(ended).toMatchObject({ kind: 'failed' });
    expect(moved).toMatchObject({
      kind: 'released',
      lastResult: 'sms-opted-out',
      moveTo: {
        channel: 'email',
        recipient: 'a@example.com',
        from: '+819012345678',
        tried: [{ channel: 'sms', reason: 'sms-opted-out' }],
        attempts: 1,
      },
    });
    // Without a next channel it fails, as any task would.
    expect(failed).toMatchObject({ kind: 'failed', lastResult: 'sms-opted-out' });
    expect(failed).not.toHaveProperty('moveTo');
  });

  it('moves a task the claim found unreachable without sending it', async () => {
    const fallsBack = {
      channel: 'email' as const,
      recipient: 'a@example.com',
      from: '+819012345678',
      tried: [{ channel: 'sms' as const, reason: 'opted-out' }],
      attempts: 0,
    };
    const [outcome] = await run([task('a', { fallsBack, optedOut: true })]);
    expect(outcome).toMatchObject({ kind: 'released', lastResult: 'opted-out', moveTo: fallsBack });
  });
});
