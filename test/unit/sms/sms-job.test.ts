/** An SMS job as an operator asks for it: the client's SMS settings, the job's text, its list's number column. */
import { describe, expect, it } from 'vitest';
import { mapHeader } from '#shared/csv/headers.ts';
import { jobReportCsv } from '#shared/jobs/report.ts';
import { jobOptionsFromQuery, parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { fieldErrorsOf, TOKYO_CLIENT } from '../jobs/fakes.ts';

const NOW = Date.parse('2026-11-29T00:00:00Z');
const SMS = { originationIdentity: '+815012345678', partsPerSecond: 20, messageType: 'PROMOTIONAL' };

describe('an SMS job', () => {
  it("keeps the client's SMS settings as given; refuses a bad identity, rate or type, naming each field", () => {
    expect(parseClientSettings('acme', { ...TOKYO_CLIENT, sms: SMS }, NOW).sms).toEqual(SMS);
    const errors = fieldErrorsOf(() =>
      parseClientSettings(
        'acme',
        {
          ...TOKYO_CLIENT,
          sms: { originationIdentity: 'no spaces allowed', partsPerSecond: 0, messageType: 'MARKETING' },
        },
        NOW,
      ),
    );
    expect(Object.keys(errors).sort()).toEqual([
      'sms.messageType',
      'sms.originationIdentity',
      'sms.partsPerSecond',
    ]);
  });

  it('needs SMS settings on the client and a text, and keeps the text', () => {
    const client = parseClientSettings('acme', TOKYO_CLIENT, NOW);
    expect(
      fieldErrorsOf(() => parseJobOptions({ name: 'x', channel: 'sms', sms: { body: 'hi' } }, client, NOW)),
    ).toEqual({ channel: ['an SMS job needs the client to have SMS settings (an origination identity)'] });
    const texting = parseClientSettings('acme', { ...TOKYO_CLIENT, sms: SMS }, NOW);
    expect(fieldErrorsOf(() => parseJobOptions({ name: 'x', channel: 'sms' }, texting, NOW))).toEqual({
      sms: ['an SMS job needs its text ({ body })'],
    });
    expect(
      parseJobOptions({ name: 'x', channel: 'sms', sms: { body: '{{name}}様 明日10時です' } }, texting, NOW),
    ).toMatchObject({ channel: 'sms', sms: { body: '{{name}}様 明日10時です' } });
  });

  it('refuses an empty or overlong text, a text on another channel, and an email on an SMS job', () => {
    const texting = parseClientSettings('acme', { ...TOKYO_CLIENT, sms: SMS }, NOW);
    expect(
      fieldErrorsOf(() => parseJobOptions({ name: 'x', channel: 'sms', sms: { body: ' ' } }, texting, NOW)),
    ).toEqual({ sms: ['the body is empty'] });
    expect(
      fieldErrorsOf(() =>
        parseJobOptions({ name: 'x', channel: 'sms', sms: { body: 'あ'.repeat(1_601) } }, texting, NOW),
      ),
    ).toEqual({ sms: ['the body is 1601 characters long; at most 1600'] });
    expect(
      fieldErrorsOf(() =>
        parseJobOptions(
          { name: 'x', channel: 'sms', sms: { body: 'x' }, email: { subject: 's', text: 't' } },
          texting,
          NOW,
        ),
      ),
    ).toEqual({ email: ['only an email job sends an email; an SMS job does not'] });
    expect(
      fieldErrorsOf(() => parseJobOptions({ name: 'x', channel: 'call', sms: { body: 'x' } }, texting, NOW)),
    ).toEqual({ sms: ['only an SMS job sends a text; a call job does not'] });
  });

  it('reads the text from an inline upload query string', () => {
    expect(jobOptionsFromQuery({ name: 'q', channel: 'sms', sms: '{"body":"こんにちは"}' })).toEqual({
      name: 'q',
      channel: 'sms',
      sms: { body: 'こんにちは' },
    });
  });

  it.each(['携帯電話番号', '携帯', 'mobile', '電話番号', 'phone'])(
    'finds the number column named %j',
    (header) => {
      expect(mapHeader(['名前', header], 'sms')).toMatchObject({ ok: true, map: { recipient: 1 } });
    },
  );

  it('says which column it needs when the header has none', () => {
    expect(mapHeader(['名前', 'メールアドレス'], 'sms')).toEqual({
      ok: false,
      reason:
        'no mobile number column (name it 携帯電話番号, 電話番号, mobile or phone): the header row has 名前, メールアドレス',
    });
  });

  it("the report adds each task's delivery state as the sms column", async () => {
    const task = {
      clientId: 'c',
      jobId: 'j',
      taskId: 't1',
      row: 2,
      channel: 'message' as const,
      recipient: '+819012345678',
      variables: {},
      state: 'completed' as const,
      attempts: 1,
      readyAt: 0,
      updatedAt: 0,
      lastResult: 'accepted',
      deliveryState: 'delivered' as const,
    };
    let csv = '';
    for await (const chunk of jobReportCsv(
      (async function* () {})(),
      (async function* () {
        yield task;
      })(),
      { channel: 'sms' },
    ))
      csv += Buffer.from(chunk).toString('utf8');
    const [header, row] = csv.replace('\ufeff', '').split('\r\n');
    expect(header!.split(',').at(-1)).toBe('sms');
    expect(row!.split(',').at(-1)).toBe('delivered');
  });
});

describe("an SMS list's number column", () => {
  it('is the mobile column when the list has a landline column too, whichever comes first', () => {
    expect(mapHeader(['電話番号', '携帯電話番号', '名前'], 'sms')).toMatchObject({
      ok: true,
      map: { recipient: 1, variables: [{ index: 0, key: '電話番号' }] },
    });
    expect(mapHeader(['phone', 'name', 'Mobile'], 'sms')).toMatchObject({ ok: true, map: { recipient: 2 } });
    // A call list keeps the leftmost phone column.
    expect(mapHeader(['電話番号', '携帯電話番号'], 'call')).toMatchObject({
      ok: true,
      map: { recipient: 0 },
    });
  });

  it('refuses an origination identity that the service would not take', () => {
    for (const originationIdentity of [
      '+81-50-1234-5678',
      '+0123',
      'abc+def',
      'TOOLONGSENDERID',
      'arn:aws:sns:x',
    ])
      expect(
        Object.keys(
          fieldErrorsOf(() =>
            parseClientSettings('acme', { ...TOKYO_CLIENT, sms: { originationIdentity } }, NOW),
          ),
        ),
        originationIdentity,
      ).toEqual(['sms.originationIdentity']);
    for (const originationIdentity of [
      '+815012345678',
      'SHOP',
      'pool-0123456789abcdef0123456789abcdef',
      'arn:aws:sms-voice:ap-northeast-1:123456789012:phone-number/phone-0123456789abcdef0123456789abcdef',
    ])
      expect(parseClientSettings('acme', { ...TOKYO_CLIENT, sms: { originationIdentity } }, NOW).sms).toEqual(
        {
          originationIdentity,
        },
      );
    expect(
      Object.keys(
        fieldErrorsOf(() =>
          parseClientSettings('acme', { ...TOKYO_CLIENT, sms: { ...SMS, configurationSet: 'mine' } }, NOW),
        ),
      ),
    ).toEqual(['sms.configurationSet']);
  });
});
