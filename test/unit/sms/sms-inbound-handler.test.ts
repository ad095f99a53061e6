/**
 * The sms-inbound function (`lambdas/sms-inbound/handler.ts` over `shared/sms/inbound-opt-outs.ts`):
 * a customer's text back, as SNS delivers the two-way payload to the queue (raw, or in SNS's
 * envelope). An opt-out keyword puts the sender on the suppression list of every client sending from
 * the number texted — kind `phone`, source `sms-stop` —; an opt-in, a reply, a number no client
 * sends from, or a payload of no use changes nothing; a failed write hands back that record only;
 * no phone number is logged. The payload is the user guide's (`fixtures/two-way-stop.json`).
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeSmsInboundHandler } from '#lambdas/sms-inbound/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { makeRecordInboundSms, type SmsNumberDirectory } from '#shared/sms/inbound-opt-outs.ts';
import type { SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import { fixture, sqsEvent } from './events.ts';

const NOW = 1_790_000_000_000;
const STOP = fixture('two-way-stop');
const text = (changes: Record<string, unknown>) => ({ ...STOP, ...changes });

class MemorySuppressions implements SuppressionWriter {
  readonly entries = new Map<string, SuppressionEntry>();
  fail = false;
  async add(clientId: string, entries: readonly SuppressionEntry[]): Promise<void> {
    if (this.fail) throw new Error('ThrottlingException');
    for (const entry of entries) this.entries.set(`${clientId} ${entry.recipient}`, entry);
  }
}

function setup(numbers: Record<string, readonly string[]> = { '+12125550101': ['shop', 'shop-2'] }) {
  const suppressions = new MemorySuppressions();
  const directory: SmsNumberDirectory = { clientsOf: async (number) => numbers[number] ?? [] };
  const lines: Record<string, unknown>[] = [];
  const handler = makeSmsInboundHandler({
    record: makeRecordInboundSms({ numbers: directory, suppressions, clock: { now: () => NOW } }),
    log: new PowertoolsLog('sms-inbound', { write: (line) => lines.push(JSON.parse(line)) }),
  });
  const invoke = async (e: SQSEvent) =>
    (await handler(e, lambdaContext({ functionName: 'sms-inbound', timeoutMs: 30_000 }))) as SQSBatchResponse;
  return { suppressions, lines, invoke };
}

describe('sms-inbound', () => {
  it("puts the sender of the guide's payload, texting STOP, on the list of each client of the number, raw or in SNS's envelope", async () => {
    for (const body of [STOP, { Type: 'Notification', MessageId: 'x', Message: JSON.stringify(STOP) }]) {
      const { suppressions, invoke } = setup();
      expect(await invoke(sqsEvent([body]))).toEqual({ batchItemFailures: [] });
      const entry = {
        recipient: '+14255550182',
        kind: 'phone',
        source: 'sms-stop',
        reason: 'texted STOP to +12125550101',
        addedAt: NOW,
      };
      expect([...suppressions.entries]).toEqual([
        ['shop +14255550182', entry],
        ['shop-2 +14255550182', entry],
      ]);
    }
  });

  it.each(['stop', 'Stop please', 'UNSUBSCRIBE', 'arret', 'STOPALL', 'opt-out'])(
    'takes %j as an opt-out (the keyword the service matched, else the first word)',
    async (body) => {
      const { suppressions, invoke } = setup();
      await invoke(sqsEvent([text({ messageKeyword: '', messageBody: body })]));
      expect(suppressions.entries.size).toBe(2);
    },
  );

  it('changes nothing for an opt-in, a reply, or a payload of no use; gives back a STOP to a number no client sends from', async () => {
    const { suppressions, lines, invoke } = setup();
    const out = await invoke(
      sqsEvent([
        text({ messageKeyword: 'UNSTOP', messageBody: 'UNSTOP' }),
        text({ messageKeyword: 'JOIN', messageBody: 'EXAMPLE' }),
        text({ messageKeyword: '', messageBody: 'Please don’t stop' }),
        text({ destinationNumber: '+12125550999' }),
        text({ originationNumber: '4255550182' }),
        '{',
      ]),
    );
    // The STOP to a number no client sends from goes back to the queue (then its dead-letter queue).
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm3' }]);
    expect(suppressions.entries.size).toBe(0);
    expect(lines.filter((l) => l.message === 'inbound SMS dropped').map((l) => l.reason)).toEqual([
      'originationNumber is not an E.164 number',
      'not JSON',
    ]);
    expect(
      lines.some((l) => l.message === 'opt-out texted to a number no client sends from: given back'),
    ).toBe(true);
  });

  it('hands back the record whose write failed', async () => {
    const { suppressions, invoke } = setup();
    suppressions.fail = true;
    const out = await invoke(sqsEvent([text({ messageKeyword: '', messageBody: 'hello' }), STOP]));
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
  });

  it('logs no phone number', async () => {
    const { lines, invoke } = setup();
    await invoke(
      sqsEvent([STOP, text({ destinationNumber: '+12125550999' }), text({ originationNumber: 'x' })]),
    );
    expect(lines.length).toBeGreaterThan(0);
    expect(JSON.stringify(lines)).not.toMatch(/425555|212555/);
  });
});
