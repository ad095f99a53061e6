/**
 * The path of SES's events (`shared/email/event-destination.ts`): every detail-type the rule matches
 * is one the events module reads (the two lists cannot drift apart), and the local cloud's router
 * matches what the rule's pattern says, no more.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  EMAIL_EVENT_DETAIL_TYPES,
  EMAIL_EVENT_TYPES,
  emailConfigurationSetName,
  emailEventPattern,
  matchesEmailEventRule,
} from '#shared/email/event-destination.ts';
import { parseSesEvent } from '#shared/email/ses-events.ts';

const SET = emailConfigurationSetName('dev');

/** SES's documented Send example (`fixtures/`), as a configuration set named `set` publishes it. */
function sendEvent(set: string, detailType = 'Email Sent'): Record<string, unknown> {
  const event = JSON.parse(readFileSync(new URL('./fixtures/email-sent.json', import.meta.url), 'utf8'));
  event.detail.mail.tags['ses:configuration-set'] = [set];
  return { ...event, 'detail-type': detailType };
}

describe("SES's event destination and the rule", () => {
  it('names the configuration set by stage', () => {
    expect(SET).toBe('switchboard-dev-email');
  });

  it.each(EMAIL_EVENT_TYPES)('%s: its detail-type is one the events module reads', (type) => {
    const detailType = EMAIL_EVENT_DETAIL_TYPES[type];
    const result = parseSesEvent({
      ...sendEvent(SET),
      'detail-type': detailType,
      detail: { eventType: 'x' },
    });
    // Refused for its detail, never as an unknown detail-type.
    expect('ignored' in result && result.ignored).not.toMatch(/unknown SES detail-type/);
  });

  it('the pattern: aws.ses, the seven detail-types, this configuration set', () => {
    expect(emailEventPattern(SET)).toEqual({
      source: ['aws.ses'],
      detailType: [
        'Email Sent',
        'Email Delivered',
        'Email Bounced',
        'Email Complaint Received',
        'Email Rejected',
        'Email Delivery Delayed',
        'Email Rendering Failed',
      ],
      detail: { mail: { tags: { 'ses:configuration-set': [SET] } } },
    });
  });

  it("the local router matches the set's events, not another set's, another type or another source", () => {
    expect(matchesEmailEventRule(sendEvent(SET), SET)).toBe(true);
    expect(matchesEmailEventRule(sendEvent('someone-elses'), SET)).toBe(false);
    expect(matchesEmailEventRule(sendEvent(SET, 'Email Opened'), SET)).toBe(false);
    expect(matchesEmailEventRule({ ...sendEvent(SET), source: 'aws.connect' }, SET)).toBe(false);
    expect(matchesEmailEventRule({ source: 'aws.ses', 'detail-type': 'Email Sent' }, SET)).toBe(false);
    expect(matchesEmailEventRule(null, SET)).toBe(false);
  });
});
