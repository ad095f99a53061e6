/**
 * Issue 38 #5 on the local stack: an email's one-click unsubscribe link through the API Gateway
 * stand-in, the deployed handler module and DynamoDB Local. A link signed as a broker signs it
 * (`stack.unsubscribe.link`) is POSTed exactly as Gmail and Yahoo do for RFC 8058
 * (`Content-Type: application/x-www-form-urlencoded`, body `List-Unsubscribe=One-Click`, no cookie,
 * no credential) and the address is on the client's suppression list at once, as the operator API
 * shows it. Opening the link (GET) changes nothing; neither does any forged or altered link, an
 * oversized body or another method: the control table reads the same before and after.
 */
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { MAX_ONE_CLICK_BODY_BYTES } from '#shared/email/unsubscribe.ts';

let stack: LocalStack;
const clientId = 'unsubscribe-e2e';

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({ stage: 'e2eunsubscribe', port: 0 });
  const put = await stack.operator('PUT', `/clients/${clientId}`, {
    json: {
      maxConcurrentCalls: 1,
      callsPerSecond: 1,
      timeZone: 'Asia/Tokyo',
      callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
      defaultRegion: 'JP',
    },
  });
  expect(put.status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

/** Every item of the control table, in a stable order (what a refused request must not change). */
async function controlTable(): Promise<string[]> {
  const ddb = makeDynamoClient({
    region: stack.cloud.region,
    credentials: LOCAL_CREDENTIALS,
    endpoint: stack.cloud.dynamoEndpoint,
  });
  try {
    const items: string[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await ddb.send(
        new ScanCommand({
          TableName: stack.cloud.tableNames.control!,
          ConsistentRead: true,
          ExclusiveStartKey: start as never,
        }),
      );
      for (const item of page.Items ?? []) items.push(JSON.stringify(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return items.sort();
  } finally {
    ddb.destroy();
  }
}

interface SuppressionView {
  readonly recipient: string;
  readonly kind?: string;
  readonly source?: string;
  readonly reason?: string;
}

async function suppressions(): Promise<SuppressionView[]> {
  const answer = await stack.operator('GET', `/clients/${clientId}/suppressions`);
  expect(answer.status).toBe(200);
  return answer.json<{ suppressions: SuppressionView[] }>().suppressions;
}

/** RFC 8058 §3.2's POST, byte for byte what a mail provider sends: no cookie, no credential. */
function oneClick(url: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'List-Unsubscribe=One-Click',
    redirect: 'manual',
  });
}

describe('one-click unsubscribe through the local HTTP API', () => {
  it('links point at the local API: {api}/unsubscribe/{token}', () => {
    expect(stack.unsubscribe.baseUrl).toBe(`${stack.api.url}/unsubscribe`);
    const link = stack.unsubscribe.link({ clientId, jobId: 'job-1', address: 'taro@example.com' });
    expect(link.startsWith(`${stack.api.url}/unsubscribe/`)).toBe(true);
    expect(link.length).toBeLessThan(250);
  });

  it('GET shows the confirm page, with its headers, and changes nothing', async () => {
    const link = stack.unsubscribe.link({ clientId, jobId: 'job-1', address: 'scanned@example.com' });
    const before = await controlTable();
    const answer = await fetch(link, { headers: { 'accept-language': 'ja,en;q=0.5' } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(answer.headers.get('content-security-policy')).toMatch(/^default-src 'none';.*form-action 'self'/);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.headers.get('referrer-policy')).toBe('no-referrer');
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await answer.text();
    expect(html).toMatch(/^<!doctype html><html lang="ja">/);
    expect(html).toContain('s***@example.com');
    expect(html).toContain('<input type="hidden" name="List-Unsubscribe" value="One-Click">');
    expect(await controlTable()).toEqual(before);
  });

  it("the mail provider's one-click POST suppresses the address at once; again is the same 200", async () => {
    const link = stack.unsubscribe.link({ clientId, jobId: 'job-2025-06', address: 'taro@example.com' });
    const answer = await oneClick(link);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('location')).toBeNull();
    expect(await answer.text()).toBe('Unsubscribed.\n');
    const entry = (await suppressions()).find((s) => s.recipient === 'taro@example.com');
    expect(entry).toMatchObject({ kind: 'email', source: 'unsubscribe' });
    expect(entry?.reason).toContain('job-2025-06');

    const again = await oneClick(link);
    expect(again.status).toBe(200);
    expect((await suppressions()).filter((s) => s.recipient === 'taro@example.com')).toHaveLength(1);
  });

  it("the same pair as multipart/form-data, and the confirm page's own form (a browser), work too", async () => {
    const multipart = new FormData();
    multipart.append('List-Unsubscribe', 'One-Click');
    const first = stack.unsubscribe.link({ clientId, jobId: 'job-3', address: 'hanako@example.jp' });
    expect((await fetch(first, { method: 'POST', body: multipart })).status).toBe(200);

    const second = stack.unsubscribe.link({ clientId, jobId: 'job-3', address: 'jiro@example.net' });
    const page = await fetch(second, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'text/html,application/xhtml+xml',
        'accept-language': 'en',
      },
      body: new URLSearchParams({ 'List-Unsubscribe': 'One-Click' }),
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('You are unsubscribed');
    const recipients = (await suppressions()).map((s) => s.recipient);
    expect(recipients).toEqual(expect.arrayContaining(['hanako@example.jp', 'jiro@example.net']));
  });

  it('a forged, altered, truncated or unknown-key link, a large body or another method changes nothing', async () => {
    const link = stack.unsubscribe.link({ clientId, jobId: 'job-4', address: 'saburo@example.com' });
    const token = link.slice(link.lastIndexOf('/') + 1);
    const [kid, payload, mac] = token.split('.') as [string, string, string];
    const otherPayload = Buffer.from(
      JSON.stringify([clientId, 'job-4', 'someone-else@example.com', Math.floor(Date.now() / 1000)]),
    ).toString('base64url');
    const base = stack.unsubscribe.baseUrl;
    const before = await controlTable();
    for (const forged of [
      `${kid}.${otherPayload}.${mac}`,
      `${kid}.${payload}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`,
      token.slice(0, token.length - 10),
      `zz.${payload}.${mac}`,
      `${kid}.${payload}`,
      'not-a-token',
    ]) {
      const answer = await oneClick(`${base}/${forged}`);
      expect(answer.status, forged).toBe(404);
      expect(await answer.text()).toContain('This link is not valid');
      expect((await fetch(`${base}/${forged}`)).status).toBe(404);
    }
    const large = await fetch(link, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `List-Unsubscribe=One-Click&pad=${'x'.repeat(MAX_ONE_CLICK_BODY_BYTES)}`,
    });
    expect(large.status).toBe(413);
    const other = await fetch(link, { method: 'GET', headers: { accept: 'text/html' } });
    expect(other.status).toBe(200);
    // API Gateway routes GET and POST only: any other method matches no route.
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      const answer = await fetch(link, {
        method,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      });
      expect(answer.status, method).toBe(404);
    }
    const notOneClick = await fetch(link, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=Yes',
    });
    expect(notOneClick.status).toBe(400);
    expect(await controlTable()).toEqual(before);
    expect((await suppressions()).map((s) => s.recipient)).not.toContain('saburo@example.com');
  });
});
