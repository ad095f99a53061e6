import { describe, expect, it } from 'vitest';
import { contentPlaceholders, unfilledPlaceholders } from '#shared/jobs/placeholders.ts';

describe("a job's placeholders against its list's header", () => {
  it('reads them from a LINE message, an email and a text; a call job has none', () => {
    expect(
      contentPlaceholders({
        channel: 'line',
        message: { messages: [{ type: 'text', text: '{{name}} {{coupon}}' }] },
      }),
    ).toEqual(['name', 'coupon']);
    expect(
      contentPlaceholders({ channel: 'email', email: { subject: '{{名前}}様', html: '<p>{{coupon}}</p>' } }),
    ).toEqual(['名前', 'coupon']);
    expect(contentPlaceholders({ channel: 'sms', sms: { body: '{{time}}に{{name}}' } })).toEqual([
      'time',
      'name',
    ]);
    expect(contentPlaceholders({ channel: 'call' })).toEqual([]);
  });

  it('fills a column by its header, and the name as {{name}} or its header, only when the list has a name column', () => {
    const header = { variables: ['coupon'], hasName: true };
    expect(unfilledPlaceholders(['coupon', 'name', 'お名前', '氏名', 'クーポン'], header)).toEqual([
      'クーポン',
    ]);
    expect(unfilledPlaceholders(['name', 'お名前'], { variables: ['coupon'], hasName: false })).toEqual([
      'name',
      'お名前',
    ]);
  });
});
