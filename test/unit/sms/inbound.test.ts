/**
 * A customer's text back to an origination number: the user guide's two-way payload, raw or inside
 * SNS's envelope; the required opt-out keywords and the opt-in ones, as the service matches keywords
 * (case-insensitive, the text's first word); replies; payloads of no use.
 */
import { describe, expect, it } from 'vitest';
import { readInboundSms } from '#shared/sms/inbound.ts';

/** "Example of a two-way SMS message payload for Amazon SNS topics". */
const DOCUMENTED = {
  originationNumber: '+14255550182',
  destinationNumber: '+12125550101',
  messageKeyword: 'JOIN',
  messageBody: 'EXAMPLE',
  inboundMessageId: 'cae173d2-66b9-564c-8309-21f858e9fb84',
  previousPublishedMessageId: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
};

describe('inbound SMS', () => {
  it("reads the guide's example as a reply, raw or in an SNS notification", () => {
    const expected = {
      from: '+14255550182',
      to: '+12125550101',
      messageId: 'cae173d2-66b9-564c-8309-21f858e9fb84',
      intent: 'reply',
    };
    expect(readInboundSms(JSON.stringify(DOCUMENTED))).toEqual(expected);
    expect(
      readInboundSms(JSON.stringify({ Type: 'Notification', Message: JSON.stringify(DOCUMENTED) })),
    ).toEqual(expected);
  });

  it.each([
    'ARRET',
    'CANCEL',
    'END',
    'OPT-OUT',
    'OPTOUT',
    'QUIT',
    'REMOVE',
    'STOP',
    'STOPALL',
    'TD',
    'UNSUBSCRIBE',
  ])('%s opts out, whatever its case, alone or first in the text', (keyword) => {
    for (const messageBody of [keyword, keyword.toLowerCase(), ` ${keyword}. please`]) {
      expect(readInboundSms({ ...DOCUMENTED, messageKeyword: '', messageBody })).toMatchObject({
        intent: 'opt-out',
        keyword,
      });
    }
  });

  it('the keyword the service matched decides; UNSTOP and START opt back in', () => {
    expect(readInboundSms({ ...DOCUMENTED, messageKeyword: 'STOP', messageBody: 'やめて' })).toMatchObject({
      intent: 'opt-out',
      keyword: 'STOP',
    });
    expect(readInboundSms({ ...DOCUMENTED, messageKeyword: '', messageBody: 'start' })).toMatchObject({
      intent: 'opt-in',
      keyword: 'START',
    });
    expect(readInboundSms({ ...DOCUMENTED, messageKeyword: '', messageBody: 'Please stop' })).toMatchObject({
      intent: 'reply',
    });
  });

  it.each([
    ['not JSON', '{'],
    ['not an object', 'null'],
    ['originationNumber', { ...DOCUMENTED, originationNumber: '4255550182' }],
    ['destinationNumber', { ...DOCUMENTED, destinationNumber: '' }],
    ['inboundMessageId', { ...DOCUMENTED, inboundMessageId: undefined }],
    ['over 64 KB', 'x'.repeat(70_000)],
  ])('ignores a payload with %s', (why, body) => {
    const read = readInboundSms(body);
    expect(read).toHaveProperty('ignored');
    expect((read as { ignored: string }).ignored).toContain(why);
  });
});
