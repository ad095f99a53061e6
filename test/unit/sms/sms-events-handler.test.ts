/**
 * The sms-events function (`lambdas/sms-events/handler.ts` over `shared/sms/sms-outcomes.ts`): a
 * batch of the configuration set's events, as SNS delivers them to the queue (raw, or in SNS's
 * envelope), moves each task's SMS state forward only — whatever the order and however often an
 * event comes —, proves the text was sent, acknowledges what it cannot use, and hands back only the
 * records whose write failed. Events are the user guide's example record (`fixtures/`).
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeSmsEventsHandler } from '#lambdas/sms-events/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import type { DeliveryRecordResult } from '#shared/jobs/delivery-state.ts';
import { smsSupersedes } from '#shared/sms/sms-events.ts';
import {
  makeRecordSmsEvent,
  type SmsDeliveryChange,
  type SmsOutcomeStore,
} from '#shared/sms/sms-outcomes.ts';
import { fixture, sqsEvent, textEvent } from './events.ts';

/** The store's rule in memory: a task's record replaced only by a change that supersedes it. */
class MemoryOutcomes implements SmsOutcomeStore {
  readonly tasks = new Map<string, SmsDeliveryChange & { sentAttempt?: number }>();
  readonly known: ReadonlySet<string>;
  failOn: ((change: SmsDeliveryChange) => boolean) | undefined;

  constructor(taskIds: readonly string[]) {
    this.known = new Set(taskIds);
  }

  async record(change: SmsDeliveryChange): Promise<DeliveryRecordResult> {
    if (this.failOn?.(change)) throw new Error('ProvisionedThroughputExceededException');
    if (!this.known.has(change.taskId)) return 'unknown-task';
    const recorded = this.tasks.get(change.taskId);
    const sentAttempt = Math.max(recorded?.sentAttempt ?? 0, change.sent ? change.attempt : 0);
    if (!smsSupersedes(change, recorded)) {
      if (recorded) this.tasks.set(change.taskId, { ...recorded, sentAttempt });
      return 'stale';
    }
    this.tasks.set(change.taskId, { ...change, sentAttempt });
    return 'recorded';
  }
}

const context = { 'sb-client': 'shop', 'sb-job': 'J1', 'sb-attempt': '1' };
const event = (taskId: string, eventType: string, at: number, attempt = '1') =>
  textEvent({
    eventType,
    eventTimestamp: at,
    context: { ...context, 'sb-task': taskId, 'sb-attempt': attempt },
  });

function setup(taskIds: readonly string[] = ['t1', 't2']) {
  const outcomes = new MemoryOutcomes(taskIds);
  const lines: Record<string, unknown>[] = [];
  const handler = makeSmsEventsHandler({
    record: makeRecordSmsEvent({ outcomes }),
    log: new PowertoolsLog('sms-events', { write: (line) => lines.push(JSON.parse(line)) }),
  });
  const invoke = async (e: SQSEvent) =>
    (await handler(e, lambdaContext({ functionName: 'sms-events', timeoutMs: 30_000 }))) as SQSBatchResponse;
  return { outcomes, lines, invoke };
}

describe('sms-events', () => {
  it("records the guide's example on its task, raw or inside SNS's envelope, as sent", async () => {
    for (const body of [fixture('text-successful'), fixture('sns-notification')]) {
      const { outcomes, invoke } = setup(['t00007']);
      expect(await invoke(sqsEvent([body]))).toEqual({ batchItemFailures: [] });
      expect(outcomes.tasks.get('t00007')).toEqual({
        clientId: 'shop',
        jobId: 'J1',
        taskId: 't00007',
        attempt: 1,
        state: 'sent',
        at: 1686975103470,
        sent: true,
        sentAttempt: 1,
      });
    }
  });

  it('ends each task in its highest event whatever the order and the duplicates, in one batch or many', async () => {
    const all = [
      event('t1', 'TEXT_SUCCESSFUL', 1),
      event('t1', 'TEXT_DELIVERED', 2),
      event('t2', 'TEXT_SUCCESSFUL', 1),
      event('t2', 'TEXT_CARRIER_UNREACHABLE', 2),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.shuffledSubarray([...all, ...all], { minLength: 8, maxLength: 8 }),
        fc.integer({ min: 1, max: 8 }),
        async (bodies, batchSize) => {
          const { outcomes, invoke } = setup();
          for (let i = 0; i < bodies.length; i += batchSize)
            expect((await invoke(sqsEvent(bodies.slice(i, i + batchSize)))).batchItemFailures).toEqual([]);
          expect(outcomes.tasks.get('t1')).toMatchObject({ state: 'delivered', at: 2 });
          expect(outcomes.tasks.get('t2')).toMatchObject({
            state: 'unreachable',
            reason: 'TEXT_CARRIER_UNREACHABLE: Message has been accepted by phone carrier',
          });
        },
      ),
      { numRuns: 50 },
    );
  });

  it("a later attempt's events supersede an earlier one's; an earlier attempt's late event does not", async () => {
    const { outcomes, invoke } = setup();
    await invoke(sqsEvent([event('t1', 'TEXT_BLOCKED', 5, '2'), event('t1', 'TEXT_DELIVERED', 3, '1')]));
    expect(outcomes.tasks.get('t1')).toMatchObject({ attempt: 2, state: 'blocked', sentAttempt: 2 });
  });

  it('acknowledges what it cannot use, with the reason logged, and counts outcomes once a batch', async () => {
    const { outcomes, lines, invoke } = setup();
    const out = await invoke(
      sqsEvent([
        'not json',
        textEvent({ context: { other: 'app' } }),
        textEvent({ eventType: 'VOICE_COMPLETED' }),
        event('t9', 'TEXT_DELIVERED', 1),
        event('t1', 'TEXT_DELIVERED', 1),
      ]),
    );
    expect(out.batchItemFailures).toEqual([]);
    expect(outcomes.tasks.get('t1')).toMatchObject({ state: 'delivered' });
    const dropped = lines.filter((l) => l.message === 'SMS event dropped').map((l) => l.reason);
    expect(dropped).toEqual([
      'not JSON',
      'not a text of Switchboard (no sb- context)',
      'not a text event of Switchboard\'s (eventType "VOICE_COMPLETED")',
    ]);
    expect(lines.some((l) => l.message === 'SMS event for no task of the client' && l.taskId === 't9')).toBe(
      true,
    );
  });

  it('hands back only the records whose write failed', async () => {
    const { outcomes, invoke } = setup();
    outcomes.failOn = (change) => change.taskId === 't2';
    const out = await invoke(sqsEvent([event('t1', 'TEXT_DELIVERED', 1), event('t2', 'TEXT_DELIVERED', 1)]));
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(outcomes.tasks.get('t1')).toMatchObject({ state: 'delivered' });
    expect(outcomes.tasks.has('t2')).toBe(false);
  });

  it('logs no phone number', async () => {
    const { lines, invoke } = setup();
    await invoke(sqsEvent([event('t9', 'TEXT_DELIVERED', 1), textEvent({ context: {} }), 'x']));
    expect(JSON.stringify(lines)).not.toMatch(/\+1425|\+1206/);
  });
});
