/**
 * The suppression list's routes on the local cloud: the jobs-api Lambda behind the API Gateway
 * stand-in (SigV4), DynamoDB Local. Add, look up, page, remove, and upload a CSV with bad rows.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { testCloud, uniqueName } from '../../support/cloud.ts';
import { CLIENT, useJobsApi } from '../../support/jobs-api.ts';

const cloud = testCloud();
const { call } = useJobsApi(cloud);
const sjisList = readFileSync(new URL('../../fixtures/suppressions/dnc-list-sjis.csv', import.meta.url));

async function newClient(): Promise<string> {
  const clientId = uniqueName('dnc');
  expect((await call('PUT', `/clients/${clientId}`, CLIENT)).status).toBe(200);
  return clientId;
}

describe('the suppression list by API', () => {
  it('adds numbers written as a list writes them and LINE ids, looks them up, pages and removes them', async () => {
    const clientId = await newClient();
    const lineId = `U${'a'.repeat(32)}`;
    const added = await call('POST', `/clients/${clientId}/suppressions`, {
      recipients: ['090-1234-5678', lineId],
      reason: 'asked by phone',
    });
    expect(added.status).toBe(200);
    expect(added.body.suppressions).toEqual([
      expect.objectContaining({
        recipient: '+819012345678',
        kind: 'phone',
        source: 'api',
        reason: 'asked by phone',
      }),
      expect.objectContaining({ recipient: lineId, kind: 'line', source: 'api' }),
    ]);

    const lookup = await call('GET', `/clients/${clientId}/suppressions?recipient=09012345678,08000000000`);
    expect(lookup.status).toBe(200);
    expect(lookup.body.suppressions).toEqual([
      expect.objectContaining({ recipient: '+819012345678', input: '09012345678', suppressed: true }),
      { recipient: '+818000000000', input: '08000000000', suppressed: false },
    ]);

    const first = await call('GET', `/clients/${clientId}/suppressions?limit=1`);
    expect(first.body.suppressions).toHaveLength(1);
    const second = await call('GET', `/clients/${clientId}/suppressions?limit=1&next=${first.body.next}`);
    expect(second.body.suppressions).toHaveLength(1);
    expect(second.body.suppressions[0].recipient).not.toBe(first.body.suppressions[0].recipient);

    const removed = await call(
      'DELETE',
      `/clients/${clientId}/suppressions/${encodeURIComponent('090-1234-5678')}`,
    );
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ recipient: '+819012345678', input: '090-1234-5678', suppressed: false });
    const after = await call('GET', `/clients/${clientId}/suppressions?recipient=09012345678`);
    expect(after.body.suppressions[0].suppressed).toBe(false);

    // The console's copy of the route answers without a token: 401 from the JWT authorizer.
    expect((await call('GET', `/console/api/clients/${clientId}/suppressions`)).status).toBe(401);
  });

  it('answers 400 naming each bad field, and 404 for an unknown client', async () => {
    const clientId = await newClient();
    const bad = await call('POST', `/clients/${clientId}/suppressions`, {
      recipients: ['090-1234-5678', 'not a number'],
      reason: 'x'.repeat(501),
      colour: 'red',
    });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.fieldErrors).sort()).toEqual(['colour', 'reason']);
    const badRecipient = await call('POST', `/clients/${clientId}/suppressions`, { recipients: ['12'] });
    expect(Object.keys(badRecipient.body.fieldErrors)).toEqual(['recipients[0]']);
    expect((await call('GET', `/clients/${clientId}/suppressions?limit=0`)).body.fieldErrors).toHaveProperty(
      'limit',
    );
    expect((await call('GET', `/clients/${uniqueName('nobody')}/suppressions`)).status).toBe(404);
  });
});

describe('a suppression CSV upload', () => {
  it('reads a Shift_JIS file with Japanese headers: good rows added with their reason, bad rows reported', async () => {
    const clientId = await newClient();
    const upload = await call('POST', `/clients/${clientId}/suppressions`, sjisList, {
      'content-type': 'application/octet-stream',
    });
    expect(upload.status).toBe(200);
    expect(upload.body).toMatchObject({ dataRows: 6, added: 2, rejected: 3, skipped: 1 });
    const problems = upload.body.problems.map((p: { row: number; column?: string; code: string }) => [
      p.row,
      p.column,
      p.code,
    ]);
    expect(problems).toEqual([
      [3, '電話番号', 'invalid-phone'],
      [4, '電話番号', 'phone-empty'],
      [6, '電話番号', 'duplicate'],
      [7, undefined, 'ragged-row'],
    ]);
    const lookup = await call('GET', `/clients/${clientId}/suppressions?recipient=090-1111-2222,09033334444`);
    expect(lookup.body.suppressions).toEqual([
      expect.objectContaining({ recipient: '+819011112222', source: 'csv', reason: '本人の申し出' }),
      expect.objectContaining({
        recipient: '+819033334444',
        source: 'csv',
        reason: 'uploaded in a suppression list',
      }),
    ]);
  });

  it('reads a list of LINE user ids and one of email addresses, and refuses a file without a recipient column naming its headers', async () => {
    const clientId = await newClient();
    const ids = [`U${'b'.repeat(32)}`, `U${'c'.repeat(32)}`];
    const upload = await call(
      'POST',
      `/clients/${clientId}/suppressions?reason=campaign%20complaint`,
      `userId\n${ids.join('\n')}\n`,
      {
        'content-type': 'text/csv',
      },
    );
    expect(upload.body).toMatchObject({ added: 2, rejected: 0 });
    const lookup = await call('GET', `/clients/${clientId}/suppressions?recipient=${ids.join(',')}`);
    expect(lookup.body.suppressions.map((s: { reason: string }) => s.reason)).toEqual([
      'campaign complaint',
      'campaign complaint',
    ]);
    const refused = await call('POST', `/clients/${clientId}/suppressions`, '住所,name\n東京都,x\n', {
      'content-type': 'text/csv',
    });
    expect(refused.status).toBe(400);
    expect(refused.body.fieldErrors.file[0]).toMatch(/住所, name/);
    // A list of addresses is an email list: its addresses go on the list as they are sent to.
    const addresses = await call(
      'POST',
      `/clients/${clientId}/suppressions`,
      'メールアドレス\nTaro@Example.COM\n',
      {
        'content-type': 'text/csv',
      },
    );
    expect(addresses.body).toMatchObject({ added: 1, rejected: 0 });
  });
});
