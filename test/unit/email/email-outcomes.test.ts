/**
 * What SES's events change (`shared/email/email-outcomes.ts`): the state a task records ends the same
 * whatever order its events arrive in and however often; `sentAttempt` is the highest attempt an
 * event proved sent; permanent bounces and complaints, and only they, put the address on the
 * client's list; anything else is ignored with a reason, never thrown.
 *
 * Events are SES's documented examples (`fixtures/`, see its README) with Switchboard's tags added.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMAIL_TAGS as TRANSPORT_TAGS } from '#shared/adapters/ses-transport.ts';
import {
  attemptOfTags,
  EMAIL_TAGS,
  type EmailOutcomeStore,
  type EmailRecordResult,
  type EmailStateChange,
  makeRecordEmailEvent,
  type RecordedEmail,
  readEmailEvent,
  supersedes,
} from '#shared/email/email-outcomes.ts';
import { parseSesEvent, type SesEvent } from '#shared/email/ses-events.ts';
import { ReopenLater, type ReopenResult, type UnreachedAttempt } from '#shared/jobs/reopen.ts';
import type { SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';

type Fixture =
  | 'email-sent'
  | 'email-delivered'
  | 'email-bounced'
  | 'email-complaint-received'
  | 'email-rejected'
  | 'email-delivery-delayed'
  | 'email-rendering-failed'
  | 'email-opened';

const TASK = { clientId: 'acme', jobId: '01JOB', taskId: 'task-7' };

/** An event's detail: its objects (`mail`, `bounce` …), each reached into by the tests that change it. */
type Detail = Record<string, Record<string, unknown>>;
interface EventJson {
  readonly detail: Detail;
  readonly [key: string]: unknown;
}

/** A fixture with Switchboard's four tags on its mail (and `detail` applied to its detail). */
function event(
  name: Fixture,
  options: { attempt?: number; tags?: Record<string, string[]>; detail?: (d: Detail) => void } = {},
): EventJson {
  const e = JSON.parse(
    readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), 'utf8'),
  ) as EventJson;
  e.detail.mail!.tags = {
    ...(e.detail.mail!.tags as object),
    ...(options.tags ?? {
      [EMAIL_TAGS.client]: [TASK.clientId],
      [EMAIL_TAGS.job]: [TASK.jobId],
      [EMAIL_TAGS.task]: [TASK.taskId],
      [EMAIL_TAGS.attempt]: [String(options.attempt ?? 1)],
    }),
  };
  options.detail?.(e.detail);
  return e;
}

function parsed(e: unknown): SesEvent {
  const result = parseSesEvent(e);
  if ('ignored' in result) throw new Error(result.ignored);
  return result;
}

function reading(e: unknown) {
  const result = readEmailEvent(parsed(e));
  if ('ignored' in result) throw new Error(result.ignored);
  return result;
}

/** A task's email attributes as the DynamoDB store keeps them, under the same rule. */
class MemoryOutcomeStore implements EmailOutcomeStore {
  readonly tasks = new Map<string, RecordedEmail & { at: number; reason?: string; sentAttempt?: number }>();
  readonly known = new Set<string>([`${TASK.clientId}/${TASK.jobId}/${TASK.taskId}`]);

  async record(change: EmailStateChange): Promise<EmailRecordResult> {
    const key = `${change.clientId}/${change.jobId}/${change.taskId}`;
    if (!this.known.has(key)) return 'unknown-task';
    const recorded = this.tasks.get(key);
    if (!supersedes(change, recorded)) {
      if (change.sent && (recorded?.sentAttempt ?? 0) < change.attempt)
        this.tasks.set(key, { ...recorded!, sentAttempt: change.attempt });
      return 'stale';
    }
    this.tasks.set(key, {
      attempt: change.attempt,
      state: change.state,
      at: change.at,
      ...(change.reason === undefined ? {} : { reason: change.reason }),
      ...(change.sent
        ? { sentAttempt: change.attempt }
        : recorded?.sentAttempt
          ? { sentAttempt: recorded.sentAttempt }
          : {}),
    });
    return 'recorded';
  }

  get task() {
    return this.tasks.get(`${TASK.clientId}/${TASK.jobId}/${TASK.taskId}`);
  }
}

/** The suppression list as entries by client and recipient (`add` replaces, as the store does). */
class MemorySuppressions implements SuppressionWriter {
  readonly entries = new Map<string, SuppressionEntry>();
  async add(clientId: string, entries: readonly SuppressionEntry[]): Promise<void> {
    for (const entry of entries) this.entries.set(`${clientId}/${entry.recipient}`, entry);
  }
}

function recorder() {
  const outcomes = new MemoryOutcomeStore();
  const suppressions = new MemorySuppressions();
  const unreached: UnreachedAttempt[] = [];
  const reopen = async (attempt: UnreachedAttempt): Promise<ReopenResult> => {
    unreached.push(attempt);
    return { outcome: 'reopened', to: 'sms' };
  };
  return {
    outcomes,
    suppressions,
    unreached,
    record: makeRecordEmailEvent({ outcomes, suppressions, reopen }),
  };
}

const keepAll = async (): Promise<ReopenResult> => ({ outcome: 'kept', why: 'test' });

const transientBounce = (attempt = 1) =>
  event('email-bounced', {
    attempt,
    detail: (d) => {
      d.bounce!.bounceType = 'Transient';
      d.bounce!.bounceSubType = 'MailboxFull';
    },
  });

describe('what an event records', () => {
  it.each([
    ['email-sent', 'sent', true, undefined],
    ['email-delivered', 'delivered', true, undefined],
    ['email-delivery-delayed', 'delivery-delayed', true, undefined],
    ['email-bounced', 'bounced', true, 'Permanent/General: smtp; 550 5.1.1 user unknown'],
    ['email-complaint-received', 'complained', true, 'abuse'],
    ['email-rejected', 'rejected', false, 'Bad content'],
    [
      'email-rendering-failed',
      'rendering-failed',
      false,
      "Attribute 'attributeName' is not present in the rendering data.",
    ],
  ] as const)('%s → %s, sent %s, reason %s', (name, state, sent, reason) => {
    const { change } = reading(event(name, { attempt: 3 }));
    expect(change).toEqual({
      ...TASK,
      attempt: 3,
      state,
      at: expect.any(Number),
      sent,
      ...(reason === undefined ? {} : { reason }),
    });
  });

  it('keeps no reason for a delivery delay (the state says it)', () => {
    expect(reading(event('email-delivery-delayed')).change.reason).toBeUndefined();
  });
});

describe('the suppression decisions', () => {
  it('a permanent bounce puts the address on the client list, source bounce, with what the server said', () => {
    const { suppress } = reading(event('email-bounced'));
    expect(suppress).toEqual([
      {
        recipient: 'recipient@example.com',
        kind: 'email',
        source: 'bounce',
        reason: 'Permanent/General: smtp; 550 5.1.1 user unknown',
        addedAt: Date.parse('2017-08-05T00:41:02.669Z'),
      },
    ]);
  });

  it('a complaint puts the address on the list, source complaint', () => {
    expect(reading(event('email-complaint-received')).suppress).toEqual([
      expect.objectContaining({ recipient: 'recipient@example.com', kind: 'email', source: 'complaint' }),
    ]);
  });

  it('a transient or undetermined bounce, a delivery, a delay, a rejection or a rendering failure does not', () => {
    const undetermined = event('email-bounced', { detail: (d) => (d.bounce!.bounceType = 'Undetermined') });
    for (const e of [
      transientBounce(),
      undetermined,
      event('email-sent'),
      event('email-delivered'),
      event('email-delivery-delayed'),
      event('email-rejected'),
      event('email-rendering-failed'),
    ])
      expect(reading(e).suppress).toEqual([]);
  });

  it('keys an entry as the list matches addresses (normalised, lower-cased); keeps a non-address off it', () => {
    const e = event('email-bounced', {
      detail: (d) => {
        d.bounce!.bouncedRecipients = [
          { emailAddress: ' Taro@EXAMPLE.com' },
          { emailAddress: 'taro@example.com' },
          { emailAddress: 'not an address' },
        ];
      },
    });
    const { suppress, unreadable } = reading(e);
    expect(suppress.map((s) => s.recipient)).toEqual(['taro@example.com']);
    expect(unreadable).toEqual(['not an address']);
  });

  it('suppresses even when the task is unknown (a complaint weeks later, the task deleted)', async () => {
    const { outcomes, suppressions, record } = recorder();
    outcomes.known.clear();
    const result = await record(event('email-complaint-received'));
    expect(result).toMatchObject({ outcome: 'unknown-task', suppressed: 1 });
    expect(suppressions.entries.get('acme/recipient@example.com')).toMatchObject({ source: 'complaint' });
  });

  it('writes the very same entry for a duplicate (the event time, not the clock)', async () => {
    const { suppressions, record } = recorder();
    await record(event('email-bounced'));
    const first = suppressions.entries.get('acme/recipient@example.com');
    await record(event('email-bounced'));
    expect(suppressions.entries.get('acme/recipient@example.com')).toEqual(first);
  });
});

describe('forward only, whatever the order', () => {
  /** Each of these messages' events, in the order SES emits them. */
  const histories: Record<string, () => EventJson[]> = {
    delivered: () => [event('email-sent'), event('email-delivery-delayed'), event('email-delivered')],
    bounced: () => [event('email-sent'), event('email-delivered'), event('email-bounced')],
    complained: () => [
      event('email-sent'),
      event('email-delivered'),
      event('email-bounced'),
      event('email-complaint-received'),
    ],
    'soft-bounced': () => [event('email-sent'), event('email-delivered'), transientBounce()],
    'a second attempt after a soft bounce': () => [
      event('email-sent', { attempt: 1 }),
      transientBounce(1),
      event('email-sent', { attempt: 2 }),
      event('email-delivered', { attempt: 2 }),
    ],
    'a first attempt sent, a second rejected': () => [
      event('email-sent', { attempt: 1 }),
      event('email-delivered', { attempt: 1 }),
      event('email-rejected', { attempt: 2 }),
    ],
  };

  /** The task's record after `events`, applied in turn. */
  async function recordedAfter(events: readonly EventJson[]) {
    const { outcomes, suppressions, record } = recorder();
    for (const e of events) await record(structuredClone(e));
    return { task: outcomes.task, list: [...suppressions.entries.keys()].sort() };
  }

  for (const [name, history] of Object.entries(histories)) {
    it(`${name}: every order, with any duplicates, ends as the events in order do`, async () => {
      const events = history();
      const expected = await recordedAfter(events);
      await fc.assert(
        fc.asyncProperty(
          fc.shuffledSubarray(events, { minLength: events.length, maxLength: events.length }),
          fc.array(fc.nat({ max: events.length - 1 }), { maxLength: 4 }),
          async (order, repeats) => {
            const arrived = [...order];
            for (const i of repeats) arrived.splice(i, 0, events[i]!);
            expect(await recordedAfter(arrived)).toEqual(expected);
          },
        ),
        { numRuns: 60 },
      );
    });
  }

  it('ends at the highest event of the highest attempt; sentAttempt is the highest attempt proved sent', async () => {
    expect((await recordedAfter(histories.complained!())).task).toMatchObject({
      state: 'complained',
      sentAttempt: 1,
    });
    expect((await recordedAfter(histories['a second attempt after a soft bounce']!())).task).toMatchObject({
      attempt: 2,
      state: 'delivered',
      sentAttempt: 2,
    });
    // The second attempt was rejected: it never left SES, the first did.
    expect((await recordedAfter(histories['a first attempt sent, a second rejected']!())).task).toMatchObject(
      {
        attempt: 2,
        state: 'rejected',
        sentAttempt: 1,
      },
    );
  });

  it('a duplicate or an earlier event arriving late is stale', async () => {
    const { record } = recorder();
    expect(await record(event('email-delivered'))).toMatchObject({ outcome: 'recorded' });
    expect(await record(event('email-delivered'))).toMatchObject({ outcome: 'stale' });
    expect(await record(event('email-sent'))).toMatchObject({ outcome: 'stale' });
  });

  it('supersedes: a later attempt always, the same attempt by rank, never an equal', () => {
    expect(supersedes({ attempt: 1, state: 'sent' }, undefined)).toBe(true);
    expect(supersedes({ attempt: 2, state: 'sent' }, { attempt: 1, state: 'complained' })).toBe(true);
    expect(supersedes({ attempt: 1, state: 'complained' }, { attempt: 2, state: 'sent' })).toBe(false);
    expect(supersedes({ attempt: 1, state: 'bounced' }, { attempt: 1, state: 'delivered' })).toBe(true);
    expect(supersedes({ attempt: 1, state: 'delivered' }, { attempt: 1, state: 'bounced' })).toBe(false);
    expect(supersedes({ attempt: 1, state: 'delivered' }, { attempt: 1, state: 'delivered' })).toBe(false);
  });
});

describe('the tags', () => {
  it('are the very tags the SES transport writes', () => {
    expect(EMAIL_TAGS).toEqual(TRANSPORT_TAGS);
  });
});

describe('events it cannot use', () => {
  it.each([
    ['not an event at all', 'hello', /not an EventBridge event/],
    ['null', null, /not an EventBridge event/],
    ['another source', { ...event('email-sent'), source: 'aws.connect' }, /not an SES event/],
    ['an engagement event', event('email-opened'), /not tracked/],
    ['an email of no Switchboard job (no sb- tags)', event('email-sent', { tags: {} }), /no sb- tags/],
    [
      'a malformed attempt',
      event('email-sent', {
        tags: { 'sb-client': ['a'], 'sb-job': ['j'], 'sb-task': ['t'], 'sb-attempt': ['0x1'] },
      }),
      /sb-attempt/,
    ],
    [
      'a task id with characters tags cannot hold',
      event('email-sent', {
        tags: { 'sb-client': ['a'], 'sb-job': ['j'], 'sb-task': ['../t'], 'sb-attempt': ['1'] },
      }),
      /sb-task/,
    ],
    [
      'a missing client',
      event('email-sent', { tags: { 'sb-job': ['j'], 'sb-task': ['t'], 'sb-attempt': ['1'] } }),
      /sb-client/,
    ],
  ])('%s: ignored with the reason, nothing written', async (_name, input, reason) => {
    const { outcomes, suppressions, record } = recorder();
    const result = await record(input);
    expect(result).toMatchObject({ outcome: 'ignored', reason: expect.stringMatching(reason) });
    expect(outcomes.tasks.size).toBe(0);
    expect(suppressions.entries.size).toBe(0);
  });

  it('never throws on arbitrary input', async () => {
    const { record } = recorder();
    await fc.assert(
      fc.asyncProperty(fc.anything(), async (input) => {
        await expect(record(input)).resolves.toMatchObject({ outcome: 'ignored' });
      }),
      { numRuns: 200 },
    );
  });

  it('a tag named like an Object member is not read as one', () => {
    expect(attemptOfTags({ constructor: 'x' } as Record<string, string>)).toMatch(/no sb- tags/);
  });

  it('a store failure is thrown, to be retried', async () => {
    const record = makeRecordEmailEvent({
      outcomes: { record: async () => Promise.reject(new Error('throttled')) },
      suppressions: new MemorySuppressions(),
      reopen: keepAll,
    });
    await expect(record(event('email-delivered'))).rejects.toThrow('throttled');
  });
});

describe('a hard bounce of a fallback job’s task', () => {
  it('asks for the task to move on after the bounce is recorded: a permanent bounce only, never a complaint or a soft bounce', async () => {
    for (const other of [transientBounce(), event('email-complaint-received')]) {
      const { record, unreached } = recorder();
      await record(other);
      expect(unreached).toEqual([]);
    }
    const { record, unreached, outcomes } = recorder();
    await expect(record(event('email-bounced'))).resolves.toMatchObject({
      outcome: 'recorded',
      reopened: 'sms',
    });
    expect(outcomes.task?.state).toBe('bounced');
    expect(unreached).toEqual([
      {
        clientId: TASK.clientId,
        jobId: TASK.jobId,
        taskId: TASK.taskId,
        attempt: 1,
        channel: 'email',
        result: 'bounced',
        entrySource: 'bounce',
        reason: 'Permanent/General: smtp; 550 5.1.1 user unknown',
      },
    ]);
  });

  it('asks again when the bounce comes again (the record is stale then: a retry after the move waited)', async () => {
    const { record, unreached } = recorder();
    await record(event('email-bounced'));
    await expect(record(event('email-bounced'))).resolves.toMatchObject({
      outcome: 'stale',
      reopened: 'sms',
    });
    expect(unreached).toHaveLength(2);
  });

  it('a move that must wait throws, so the event is given back', async () => {
    const record = makeRecordEmailEvent({
      outcomes: new MemoryOutcomeStore(),
      suppressions: new MemorySuppressions(),
      reopen: async () => Promise.reject(new ReopenLater('the task has not ended yet')),
    });
    await expect(record(event('email-bounced'))).rejects.toThrow(ReopenLater);
  });
});
