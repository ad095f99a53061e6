import { describe, expect, it } from 'vitest';
import { LINE_REFUSED_PREFIX, MessageCheck } from '#shared/campaign/message-check.ts';
import type { ValidatePort } from '#shared/campaign/ports.ts';
import { type MessageVerdict, validationVerdict } from '#shared/line/messaging-client.ts';

const STICKER = [{ type: 'sticker', packageId: '446' }];

/** A validate port answering `verdict`, counting what it was asked. */
function port(verdict: MessageVerdict | Error) {
  const asked: { endpoint: string; messages: unknown }[] = [];
  const validate: ValidatePort = async (endpoint, messages) => {
    asked.push({ endpoint, messages });
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (verdict instanceof Error) throw verdict;
    return verdict;
  };
  return { validate, asked };
}

describe("LINE's verdict from a validation endpoint's answer", () => {
  it('200 is valid; 400 is refused with each detail; anything else is unknown', () => {
    expect(validationVerdict(200, '{}')).toEqual({ kind: 'valid' });
    const body = JSON.stringify({
      message: 'The request body has 2 error(s)',
      details: [
        { message: 'must be specified', property: 'messages[0].stickerId' },
        { message: 'May not be empty', property: 'messages[1].text' },
      ],
    });
    expect(validationVerdict(400, body)).toEqual({
      kind: 'refused',
      reason: 'messages[0].stickerId: must be specified; messages[1].text: May not be empty',
    });
    expect(validationVerdict(400, '{"message":"bad"}')).toEqual({ kind: 'refused', reason: 'bad' });
    expect(validationVerdict(500, '{"message":"Internal server error"}').kind).toBe('unknown');
    expect(validationVerdict(429, '').kind).toBe('unknown');
  });
});

describe('a job’s message checked once, before its first send', () => {
  it('asks once per job, however many units wait for it; a refusal is told once, with the reason', async () => {
    const { validate, asked } = port({ kind: 'refused', reason: 'messages[0].stickerId: must be specified' });
    const refused: [string, string][] = [];
    const check = new MessageCheck({ validate, onRefused: (jobId, reason) => refused.push([jobId, reason]) });
    const reasons = await Promise.all(
      Array.from({ length: 5 }, () => check.refusal('job-1', 'multicast', STICKER)),
    );
    const reason = `${LINE_REFUSED_PREFIX}messages[0].stickerId: must be specified`;
    expect(reasons).toEqual(Array(5).fill(reason));
    expect(asked).toEqual([{ endpoint: 'multicast', messages: STICKER }]);
    expect(refused).toEqual([['job-1', reason]]);
    expect(await check.refusal('job-1', 'push', STICKER)).toBe(reason);
    expect(asked).toHaveLength(1);
  });

  it('a job LINE takes, or one LINE did not answer for (5xx, timeout, a throw), is sent', async () => {
    for (const verdict of [
      { kind: 'valid' } as const,
      { kind: 'unknown', message: 'Internal server error (HTTP 500)' } as const,
      new Error('socket hang up'),
    ]) {
      const { validate, asked } = port(verdict);
      const check = new MessageCheck({ validate, onRefused: () => expect.unreachable() });
      expect(await check.refusal('job-2', 'push', STICKER)).toBeUndefined();
      expect(await check.refusal('job-2', 'push', STICKER)).toBeUndefined();
      expect(asked).toHaveLength(1);
    }
  });

  it('each job is asked for itself', async () => {
    const { validate, asked } = port({ kind: 'valid' });
    const check = new MessageCheck({ validate });
    await check.refusal('a', 'push', STICKER);
    await check.refusal('b', 'multicast', STICKER);
    expect(asked.map((a) => a.endpoint)).toEqual(['push', 'multicast']);
  });
});
