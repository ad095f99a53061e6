/**
 * The channels API on the local stack (issue 15): a client's LINE channels created, listed, shown,
 * replaced and their secret rotated through the HTTP API, as an operator (SigV4) and as a console
 * user (user pool token). No answer ever holds a secret or a token; a webhook is verified with the
 * secrets the API set, a rotated-out one for its grace only; a client can neither see nor take
 * another client's channel.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '#local/stack.ts';
import { signBody } from '#shared/line/signature.ts';
import { clientGroup } from '#shared/operators/tenancy.ts';
import { CONSOLE_API_PREFIX } from '#shared/routes.ts';
import { until } from '../support/wait.ts';

const A = 'chan-a';
const B = 'chan-b';
const SECRET = 'first-secret-0123456789abcdef';
const NEXT_SECRET = 'next-secret-0123456789abcdef';
const TOKEN = 'access-token-0123456789abcdefghijklmnop';
const SETTINGS = {
  maxConcurrentCalls: 1,
  callsPerSecond: 1,
  timeZone: 'Asia/Tokyo',
  callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
  defaultRegion: 'JP',
};

let stack: LocalStack;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  stack = await startLocalStack({
    stage: 'e2echan',
    port: 0,
    consoleUsers: [{ username: 'user-a', password: 'User-a-password-1', groups: [clientGroup(A, 'admin')] }],
  });
  for (const clientId of [A, B])
    expect((await stack.operator('PUT', `/clients/${clientId}`, { json: SETTINGS })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

/** A webhook to `channelId` signed with `secret`: LINE's answer is the status. */
async function webhook(channelId: string, secret: string): Promise<number> {
  const body = JSON.stringify({ destination: 'U0', events: [] });
  const response = await fetch(stack.webhookUrl(channelId), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-line-signature': signBody(body, secret) },
    body,
  });
  return response.status;
}

function expectNoSecret(text: string): void {
  for (const secret of [SECRET, NEXT_SECRET, TOKEN]) expect(text).not.toContain(secret);
}

describe('the channels API', () => {
  it('creates a channel (201), answers without its secret or token, and the webhook verifies with it', async () => {
    const created = await stack.operator('PUT', `/clients/${A}/channels/a-line`, {
      json: { channelSecret: SECRET, accessToken: TOKEN, autoAnswer: 'reply', greeting: 'ようこそ' },
    });
    expect(created.status, created.body).toBe(201);
    expectNoSecret(created.body);
    expect(created.json()).toMatchObject({
      channelId: 'a-line',
      clientId: A,
      autoAnswer: 'reply',
      greeting: 'ようこそ',
      secret: { set: true },
      accessToken: { set: true },
    });
    expect(await webhook('a-line', SECRET)).toBe(200);

    const list = await stack.operator('GET', `/clients/${A}/channels`);
    expect(list.status).toBe(200);
    expectNoSecret(list.body);
    expect(list.json<{ channels: { channelId: string }[] }>().channels.map((c) => c.channelId)).toEqual([
      'a-line',
    ]);
    expect((await stack.operator('GET', `/clients/${B}/channels`)).json()).toEqual({ channels: [] });
  });

  it('replaces settings without touching the secret or token when the body leaves them out', async () => {
    const replaced = await stack.operator('PUT', `/clients/${A}/channels/a-line`, {
      json: {
        autoAnswer: 'push',
        rules: [{ match: 'contains', pattern: '営業時間', answer: '9時から18時' }],
      },
    });
    expect(replaced.status, replaced.body).toBe(200);
    expect(replaced.json()).toMatchObject({ autoAnswer: 'push', rules: [{ pattern: '営業時間' }] });
    expect(replaced.json()).not.toHaveProperty('greeting');
    expect(await webhook('a-line', SECRET)).toBe(200);
  });

  it('rotates the secret: the new one verifies, the old one through its grace; a rotation without grace keeps none', async () => {
    const rotated = await stack.operator('POST', `/clients/${A}/channels/a-line/rotate-secret`, {
      json: { channelSecret: NEXT_SECRET, graceHours: 1 },
    });
    expect(rotated.status, rotated.body).toBe(200);
    expectNoSecret(rotated.body);
    const acceptedUntil = rotated.json<{ secret: { previousAcceptedUntil: string } }>().secret
      .previousAcceptedUntil;
    expect(Date.parse(acceptedUntil) - Date.now()).toBeGreaterThan(3_500_000);
    // A receiver reads a cached channel again once it is 5 s old, before refusing a signature.
    await until(async () => (await webhook('a-line', NEXT_SECRET)) === 200, 'the new secret to verify');
    expect(await webhook('a-line', SECRET)).toBe(200);

    // A rotation without grace ends the previous secret at once.
    const again = await stack.operator('POST', `/clients/${A}/channels/a-line/rotate-secret`, {
      json: { channelSecret: SECRET, graceHours: 0 },
    });
    expect(again.status, again.body).toBe(200);
    expect(again.json()).toMatchObject({ secret: { set: true } });
    expect(again.json<{ secret: object }>().secret).not.toHaveProperty('previousAcceptedUntil');
  });

  it("keeps clients apart: another client's channel is not found, cannot be taken, and stays as it was", async () => {
    const before = await stack.operator('GET', `/clients/${A}/channels/a-line`);
    expect((await stack.operator('GET', `/clients/${B}/channels/a-line`)).status).toBe(404);
    const taken = await stack.operator('PUT', `/clients/${B}/channels/a-line`, {
      json: { channelSecret: 'stolen-secret-000000', accessToken: 'stolen-token-000000' },
    });
    expect(taken.status).toBe(409);
    expect(taken.json()).toEqual({ message: 'channel a-line is registered to another client' });
    const rotate = await stack.operator('POST', `/clients/${B}/channels/a-line/rotate-secret`, {
      json: { channelSecret: 'stolen-secret-000000' },
    });
    expect(rotate.status).toBe(404);
    expect((await stack.operator('GET', `/clients/${A}/channels/a-line`)).body).toBe(before.body);
    expect(await webhook('a-line', 'stolen-secret-000000')).toBe(401);
  });

  it('refuses bad input with errors at the field', async () => {
    const cases: [unknown, string][] = [
      [{ accessToken: TOKEN }, 'channelSecret'],
      [{ channelSecret: SECRET, accessToken: TOKEN, channelId: 'other' }, 'channelId'],
      [{ channelSecret: SECRET, accessToken: TOKEN, autoAnswer: 'shout' }, 'autoAnswer'],
      [
        {
          channelSecret: SECRET,
          accessToken: TOKEN,
          rules: [{ match: 'regex', pattern: '(a)\\1', answer: 'x' }],
        },
        'rules.0.pattern',
      ],
    ];
    for (const [json, field] of cases) {
      const answer = await stack.operator('PUT', `/clients/${A}/channels/new-line`, { json });
      expect(answer.status, answer.body).toBe(400);
      expect(Object.keys(answer.json<{ fieldErrors: object }>().fieldErrors)).toContain(field);
      expectNoSecret(answer.body);
    }
    const notJson = await stack.operator('PUT', `/clients/${A}/channels/new-line`, {
      bytes: Buffer.from('{"channelSecret":'),
      contentType: 'application/json',
    });
    expect(notJson.status).toBe(400);
    const grace = await stack.operator('POST', `/clients/${A}/channels/a-line/rotate-secret`, {
      json: { channelSecret: NEXT_SECRET, graceHours: -1 },
    });
    expect(grace.json<{ fieldErrors: object }>().fieldErrors).toHaveProperty('graceHours');
    expect((await stack.operator('GET', `/clients/${A}/channels/new-line`)).status).toBe(404);
  });

  it("answers a console user of the client, and only for the user's clients", async () => {
    const token = (await stack.cognito.issueTokens('user-a')).AccessToken;
    const get = (clientId: string) =>
      fetch(`${stack.api.url}${CONSOLE_API_PREFIX}/clients/${clientId}/channels`, {
        headers: { authorization: `Bearer ${token}` },
      });
    const own = await get(A);
    expect(own.status).toBe(200);
    expectNoSecret(await own.text());
    expect((await get(B)).status).toBe(403);
  });
});
