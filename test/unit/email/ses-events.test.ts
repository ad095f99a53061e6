import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  advance,
  EMAIL_DELIVERY_RANK,
  type EmailDeliveryState,
  type ParsedSesEvent,
  parseSesEvent,
  type SesEvent,
  suppressesAddress,
} from '#shared/email/ses-events.ts';

/**
 * SES's documented example records wrapped in EventBridge's envelope; see fixtures/README.md.
 * Records: https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-firehose-examples.html
 * Detail-types: https://docs.aws.amazon.com/ses/latest/dg/monitoring-eventbridge.html
 */
function fixture(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), 'utf8'));
}

function parsed(event: unknown): SesEvent {
  const result = parseSesEvent(event);
  if ('ignored' in result) throw new Error(`ignored: ${result.ignored}`);
  return result;
}

function ignored(event: unknown): string {
  const result = parseSesEvent(event);
  if (!('ignored' in result)) throw new Error(`parsed as ${result.kind}`);
  return result.ignored;
}

const MESSAGE_ID = 'EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000';

describe('SES events from EventBridge (AWS’s documented examples)', () => {
  it('reads a Send', () => {
    expect(parsed(fixture('email-sent'))).toEqual({
      kind: 'send',
      messageId: MESSAGE_ID,
      tags: {
        'ses:configuration-set': 'ConfigSet',
        'ses:source-ip': '192.0.2.0',
        'ses:from-domain': 'example.com',
        'ses:caller-identity': 'ses_user',
        myCustomTag1: 'myCustomTagValue1',
        myCustomTag2: 'myCustomTagValue2',
      },
      recipients: ['recipient@example.com'],
      at: Date.parse('2016-10-14T05:02:16Z'),
    });
  });

  it('reads a Delivery, timed by its own timestamp', () => {
    expect(parsed(fixture('email-delivered'))).toMatchObject({
      kind: 'delivery',
      messageId: MESSAGE_ID,
      recipients: ['recipient@example.com'],
      at: Date.parse('2016-10-19T23:21:04.133Z'),
    });
  });

  it('reads a permanent Bounce with its type, subtype and diagnostic', () => {
    expect(parsed(fixture('email-bounced'))).toEqual({
      kind: 'bounce',
      messageId: MESSAGE_ID,
      tags: {
        'ses:configuration-set': 'ConfigSet',
        'ses:source-ip': '192.0.2.0',
        'ses:from-domain': 'example.com',
        'ses:caller-identity': 'ses_user',
      },
      recipients: ['recipient@example.com'],
      permanent: true,
      reason: 'Permanent/General: smtp; 550 5.1.1 user unknown',
      at: Date.parse('2017-08-05T00:41:02.669Z'),
    });
  });

  it('reads a Complaint', () => {
    expect(parsed(fixture('email-complaint-received'))).toMatchObject({
      kind: 'complaint',
      recipients: ['recipient@example.com'],
      reason: 'abuse',
      at: Date.parse('2017-08-05T00:41:02.669Z'),
    });
  });

  it('reads a Reject, a DeliveryDelay and a Rendering Failure', () => {
    expect(parsed(fixture('email-rejected'))).toMatchObject({
      kind: 'reject',
      recipients: ['sender@example.com'],
      reason: 'Bad content',
      at: Date.parse('2016-10-14T17:38:15Z'),
    });
    expect(parsed(fixture('email-delivery-delayed'))).toMatchObject({
      kind: 'delivery-delay',
      recipients: ['recipient@example.com'],
      reason: 'TransientCommunicationFailure: smtp; 421 4.4.1 Unable to connect to remote host',
      at: Date.parse('2020-06-16T00:25:40.095Z'),
    });
    expect(parsed(fixture('email-rendering-failed'))).toMatchObject({
      kind: 'rendering-failure',
      recipients: ['recipient@example.com'],
      reason: "Attribute 'attributeName' is not present in the rendering data.",
      tags: { 'ses:configuration-set': 'ConfigSet' },
    });
  });

  it('ignores opens, clicks and subscription changes', () => {
    expect(ignored(fixture('email-opened'))).toBe('"Email Opened" events are not tracked');
    expect(ignored(fixture('email-clicked'))).toBe('"Email Clicked" events are not tracked');
    expect(ignored(fixture('email-subscribed'))).toBe('"Email Subscribed" events are not tracked');
  });

  it('reads transient and undetermined bounces as not permanent', () => {
    for (const bounceType of ['Transient', 'Undetermined']) {
      const event = fixture('email-bounced');
      const bounce = (event.detail as { bounce: Record<string, unknown> }).bounce;
      bounce.bounceType = bounceType;
      bounce.bounceSubType = bounceType === 'Transient' ? 'MailboxFull' : 'Undetermined';
      expect(parsed(event)).toMatchObject({ kind: 'bounce', permanent: false });
    }
  });

  it('ignores a not-spam feedback report: it is the opposite of a complaint', () => {
    const event = fixture('email-complaint-received');
    (event.detail as { complaint: Record<string, unknown> }).complaint.complaintFeedbackType = 'not-spam';
    expect(ignored(event)).toBe('a not-spam feedback report is not a complaint');
  });

  it('accepts "RenderingFailure" spelt without the space', () => {
    const event = fixture('email-rendering-failed');
    (event.detail as Record<string, unknown>).eventType = 'RenderingFailure';
    expect(parsed(event).kind).toBe('rendering-failure');
  });

  it('falls back to the envelope’s time when the event object has none', () => {
    const event = fixture('email-delivered');
    delete (event.detail as { delivery: Record<string, unknown> }).delivery.timestamp;
    expect(parsed(event).at).toBe(Date.parse(event.time as string));
  });
});

describe('hostile and malformed input', () => {
  it('ignores anything that is not an SES event, with the reason, and never throws', () => {
    const cases: [unknown, RegExp][] = [
      [undefined, /^not an EventBridge event/],
      [null, /^not an EventBridge event/],
      ['Email Bounced', /^not an EventBridge event/],
      [[], /^not an EventBridge event/],
      [{ ...fixture('email-sent'), source: 'aws.ec2' }, /^not an SES event \(source "aws.ec2"\)$/],
      [{ ...fixture('email-sent'), 'detail-type': 'Sending Status Disabled' }, /unknown SES detail-type/],
      [{ ...fixture('email-sent'), 'detail-type': 'toString' }, /unknown SES detail-type "toString"/],
      [{ ...fixture('email-sent'), 'detail-type': '__proto__' }, /unknown SES detail-type "__proto__"/],
      [
        { ...fixture('email-sent'), 'detail-type': 'Email Bounced' },
        /"Email Bounced" carries eventType "Send"/,
      ],
      [{ ...fixture('email-sent'), detail: [] }, /^not an EventBridge event: detail/],
      [{ ...fixture('email-sent'), detail: { eventType: 'Send' } }, /malformed "Email Sent" event: mail/],
    ];
    for (const [event, reason] of cases) expect(ignored(event)).toMatch(reason);
  });

  it('ignores an event whose known fields have the wrong shape', () => {
    const bounce = fixture('email-bounced');
    (bounce.detail as { bounce: Record<string, unknown> }).bounce.bouncedRecipients = 'recipient@example.com';
    expect(ignored(bounce)).toMatch(/^malformed "Email Bounced" event: bounce.bouncedRecipients: /);
    const noId = fixture('email-delivered');
    (noId.detail as { mail: Record<string, unknown> }).mail.messageId = '';
    expect(ignored(noId)).toMatch(/mail.messageId/);
    const noTime = fixture('email-sent');
    noTime.time = 'yesterday';
    (noTime.detail as { mail: Record<string, unknown> }).mail.timestamp = undefined;
    expect(ignored(noTime)).toBe('"Email Sent" event has no valid timestamp');
  });

  it('keeps prototype-pollution keys inert', () => {
    const raw = JSON.stringify(fixture('email-sent')).replace(
      '"tags":{',
      '"tags":{"__proto__":["polluted"],"constructor":["c"],"toString":["t"],',
    );
    const event = parsed(JSON.parse(raw));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(event.tags)).toBe(Object.prototype);
    expect(Object.hasOwn(event.tags, '__proto__')).toBe(false);
    expect(event.tags.constructor).toBe('c');
    expect(event.tags.toString).toBe('t');
    const viaDetail = JSON.parse(
      JSON.stringify(fixture('email-sent')).replace(
        '"detail":{',
        '"detail":{"__proto__":{"mail":{"messageId":"x"}},',
      ),
    );
    expect(parsed(viaDetail).messageId).toBe(MESSAGE_ID);
  });

  it('caps what it keeps of giant strings', () => {
    const event = fixture('email-bounced');
    const recipient = (event.detail as { bounce: { bouncedRecipients: Record<string, unknown>[] } }).bounce
      .bouncedRecipients[0]!;
    recipient.diagnosticCode = 'x'.repeat(5_000_000);
    expect(parsed(event).reason).toHaveLength(500);
    const giantType = { ...fixture('email-sent'), 'detail-type': 'y'.repeat(5_000_000) };
    expect(ignored(giantType).length).toBeLessThan(200);
  });

  it('answers arbitrary JSON values without throwing (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const result: ParsedSesEvent = parseSesEvent(value);
        expect('ignored' in result).toBe(true);
      }),
      { numRuns: 500 },
    );
    const base = fixture('email-bounced');
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.constantFrom('detail', 'time', 'source', 'detail-type'),
        (value, key) => {
          expect(() => parseSesEvent({ ...base, [key]: value })).not.toThrow();
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('delivery state', () => {
  const send = { kind: 'send' } as const;
  const delay = { kind: 'delivery-delay' } as const;
  const delivery = { kind: 'delivery' } as const;
  const hardBounce = { kind: 'bounce', permanent: true } as const;
  const softBounce = { kind: 'bounce', permanent: false } as const;
  const complaint = { kind: 'complaint' } as const;
  const reject = { kind: 'reject' } as const;
  const renderingFailure = { kind: 'rendering-failure' } as const;
  type Step = Pick<SesEvent, 'kind' | 'permanent'>;

  function replay(events: readonly Step[], from: EmailDeliveryState = 'accepted'): EmailDeliveryState {
    let state = from;
    for (const event of events) state = advance(state, event) ?? state;
    return state;
  }

  function permutations<T>(items: readonly T[]): T[][] {
    if (items.length <= 1) return [[...items]];
    return items.flatMap((item, i) =>
      permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
    );
  }

  it('moves forward through the common course', () => {
    expect(advance('accepted', send)).toBe('sent');
    expect(advance('sent', delay)).toBe('delivery-delayed');
    expect(advance('delivery-delayed', delivery)).toBe('delivered');
    expect(advance('delivered', complaint)).toBe('complained');
    expect(advance(undefined, delivery)).toBe('delivered');
  });

  it('never moves back, and a repeat changes nothing', () => {
    expect(advance('delivered', send)).toBeUndefined();
    expect(advance('delivered', delay)).toBeUndefined();
    expect(advance('delivered', delivery)).toBeUndefined();
    expect(advance('bounced', delivery)).toBeUndefined();
    expect(advance('complained', hardBounce)).toBeUndefined();
    expect(advance('sent', send)).toBeUndefined();
  });

  it('lets a transient bounce be superseded, but not undone by a late delivery', () => {
    expect(advance('sent', softBounce)).toBe('soft-bounced');
    expect(advance('delivered', softBounce)).toBe('soft-bounced');
    expect(advance('soft-bounced', hardBounce)).toBe('bounced');
    expect(advance('soft-bounced', complaint)).toBe('complained');
    expect(advance('soft-bounced', delivery)).toBeUndefined();
    expect(advance('soft-bounced', send)).toBeUndefined();
  });

  it('ends in the same state for every order of the same events (all 5,040 orders of seven)', () => {
    const events: Step[] = [send, send, delay, delivery, softBounce, hardBounce, complaint];
    const orders = permutations(events);
    expect(orders).toHaveLength(5_040);
    for (const order of orders) expect(replay(order)).toBe('complained');
    for (const order of permutations([send, delay, delivery, delivery, softBounce]))
      expect(replay(order)).toBe('soft-bounced');
    for (const order of permutations([send, delay, reject])) expect(replay(order)).toBe('rejected');
  });

  it('ends in the same state for every order of any events (property)', () => {
    const step = fc.constantFrom<Step>(
      send,
      delay,
      delivery,
      hardBounce,
      softBounce,
      complaint,
      reject,
      renderingFailure,
    );
    fc.assert(
      fc.property(
        fc
          .array(step, { maxLength: 8 })
          .chain((events) =>
            fc.tuple(fc.constant(events), fc.shuffledSubarray(events, { minLength: events.length })),
          ),
        ([events, shuffled]) => {
          expect(replay(shuffled)).toBe(replay(events));
          // The result is the highest-ranked state any event leads to.
          const highest = events.reduce<EmailDeliveryState>(
            (best, e) => (EMAIL_DELIVERY_RANK[replay([e])] > EMAIL_DELIVERY_RANK[best] ? replay([e]) : best),
            'accepted',
          );
          expect(replay(events)).toBe(highest);
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it('ranks every state once', () => {
    const ranks = Object.values(EMAIL_DELIVERY_RANK);
    expect(new Set(ranks).size).toBe(ranks.length);
    expect(Object.keys(EMAIL_DELIVERY_RANK)).toEqual([
      'accepted',
      'sent',
      'delivery-delayed',
      'rendering-failed',
      'rejected',
      'delivered',
      'soft-bounced',
      'bounced',
      'complained',
    ]);
  });

  it('suppresses the address on a permanent bounce or a complaint only', () => {
    expect(suppressesAddress(parsed(fixture('email-bounced')))).toBe('bounce');
    expect(suppressesAddress(parsed(fixture('email-complaint-received')))).toBe('complaint');
    for (const event of [send, delay, delivery, softBounce, reject, renderingFailure])
      expect(suppressesAddress(event)).toBeUndefined();
  });
});
