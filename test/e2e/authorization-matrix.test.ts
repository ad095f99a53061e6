/**
 * The authorization matrix of the local stack (issue 13): every operator route × every kind of
 * caller → the answer AWS would give, and every refusal changes nothing. Operator routes are IAM
 * authorised: an unsigned request, an unknown access key, a wrong secret, a signature older than
 * API Gateway's 15 minutes, another region's signature, and a principal whose identity policy
 * allows `execute-api:Invoke` only on another client's routes are each a 403 before any Lambda
 * runs. The public routes carry their own signatures: a webhook signed with another channel's
 * secret is a 401, a telephony callback signed with anything but the provider's secret too.
 *
 * The console's routes (issue 15) carry a user pool token instead: a user of client A gets 403 on
 * every console route of client B and B is unchanged; no token, an expired one, a forged one (an
 * unknown key, or a real token with its groups rewritten) and one for another app client are each
 * a 401 before any Lambda runs. Within a client (issue 36), every console route × every role
 * (viewer, operator, admin, and the bare group from before roles): allowed exactly when the route's
 * role in `shared/routes.ts` is included in the user's, and a refusal changes nothing.
 */
import { SignatureV4 } from '@smithy/signature-v4';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeApiArn } from '#local/api-gateway.ts';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { Sha256 } from '#local/operator-client.ts';
import { DEMO_CHANNEL, LOCAL_TELEPHONY, type LocalStack, startLocalStack } from '#local/stack.ts';
import { signBody } from '#shared/line/signature.ts';
import { clientGroup } from '#shared/operators/tenancy.ts';
import { CONSOLE_API_PREFIX, routes } from '#shared/routes.ts';
import { signCallback } from '#shared/telephony/callback-signature.ts';

const A = 'tenant-a';
const B = 'tenant-b';
/** An operator of client B only: its identity policy names B's routes, exactly. */
const B_OPERATOR = { accessKeyId: 'AKIDTENANTB', secretAccessKey: 'tenant-b-secret' };
const CLIENT_SETTINGS = {
  maxConcurrentCalls: 2,
  callsPerSecond: 1,
  timeZone: 'Asia/Tokyo',
  callingHours: { mon: [{ start: '09:00', end: '18:00' }] },
  defaultRegion: 'JP',
};

let stack: LocalStack;
const jobOf: Record<string, string> = {};
/** Each client's own LINE channel, for the channel routes. */
const channelOf = (clientId: string) => `${clientId}-own-channel`;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'error';
  const arn = (path: string) => executeApiArn('*', '*', path).replace(/:\d{12}:/, ':*:');
  stack = await startLocalStack({
    stage: 'e2eauthz',
    port: 0,
    consoleUsers: [
      { username: 'user-a', password: 'User-a-password-1', groups: [clientGroup(A, 'admin')] },
      { username: 'user-b', password: 'User-b-password-1', groups: [clientGroup(B, 'admin')] },
      {
        username: 'user-ab',
        password: 'User-ab-password-1',
        groups: [clientGroup(A, 'viewer'), clientGroup(B, 'operator'), clientGroup(A, 'admin')],
      },
      { username: 'viewer-a', password: 'Viewer-a-password-1', groups: [clientGroup(A, 'viewer')] },
      { username: 'operator-a', password: 'Operator-a-password-1', groups: [clientGroup(A, 'operator')] },
      { username: 'legacy-a', password: 'Legacy-a-password-1', groups: [`client:${A}`] },
      { username: 'nobody', password: 'Nobody-password-1', groups: [] },
      { username: 'boss', password: 'Boss-password-1', groups: ['admins'] },
    ],
    operators: {
      [B_OPERATOR.accessKeyId]: {
        secretAccessKey: B_OPERATOR.secretAccessKey,
        statements: [
          {
            effect: 'Allow',
            actions: ['execute-api:Invoke'],
            resources: [arn(`/clients/${B}`), arn(`/clients/${B}/*`)],
          },
        ],
      },
    },
  });
  for (const clientId of [A, B]) {
    expect((await stack.operator('PUT', `/clients/${clientId}`, { json: CLIENT_SETTINGS })).status).toBe(200);
    const created = await stack.operator('POST', `/clients/${clientId}/jobs`, {
      json: { name: `job of ${clientId}` },
    });
    expect(created.status).toBe(201);
    jobOf[clientId] = created.json<{ jobId: string }>().jobId;
    await stack.putChannel({
      channelId: channelOf(clientId),
      clientId,
      channelSecret: `${clientId}-channel-secret`,
      accessToken: `${clientId}-channel-token`,
    });
  }
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

type Caller =
  | 'unsigned'
  | 'unknown-key'
  | 'wrong-secret'
  | 'expired'
  | 'other-region'
  | 'other-client'
  | 'own-client'
  | 'admin';

async function call(
  caller: Caller,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  const url = new URL(`${stack.api.url}${path}`);
  const headers: Record<string, string> = { host: url.host, 'content-type': 'application/json' };
  const credentials = {
    unsigned: undefined,
    'unknown-key': { accessKeyId: 'AKIDNOBODY', secretAccessKey: 'whatever' },
    'wrong-secret': { accessKeyId: LOCAL_CREDENTIALS.accessKeyId, secretAccessKey: 'not-the-secret' },
    expired: LOCAL_CREDENTIALS,
    'other-region': LOCAL_CREDENTIALS,
    'other-client': B_OPERATOR,
    'own-client': B_OPERATOR,
    admin: LOCAL_CREDENTIALS,
  }[caller];
  let sent: Record<string, string> = headers;
  if (credentials) {
    const signer = new SignatureV4({
      service: 'execute-api',
      region: caller === 'other-region' ? 'eu-central-1' : stack.cloud.region,
      credentials,
      sha256: Sha256 as never,
    });
    const signed = await signer.sign(
      {
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        port: Number(url.port),
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers,
        ...(body === undefined ? {} : { body }),
      },
      caller === 'expired' ? { signingDate: new Date(Date.now() - 16 * 60_000) } : {},
    );
    sent = signed.headers as Record<string, string>;
  }
  const response = await fetch(url, { method, headers: sent, ...(body === undefined ? {} : { body }) });
  return { status: response.status, text: await response.text() };
}

const operatorRoutes = routes.filter((r) => r.auth === 'iam');
const pathFor = (template: string, clientId: string) =>
  template
    .replace('{clientId}', clientId)
    .replace('{jobId}', jobOf[clientId]!)
    .replace('{channelId}', channelOf(clientId));
const bodyFor = (method: string, template: string) =>
  method === 'GET' ? undefined : template === '/clients/{clientId}' ? JSON.stringify(CLIENT_SETTINGS) : '{}';

/** What refused requests must leave alone: a client's settings, jobs, job and channels. */
async function stateOf(clientId: string): Promise<string> {
  const parts = await Promise.all([
    stack.operator('GET', `/clients/${clientId}`),
    stack.operator('GET', `/clients/${clientId}/jobs`),
    stack.operator('GET', `/clients/${clientId}/jobs/${jobOf[clientId]}`),
    stack.operator('GET', `/clients/${clientId}/channels`),
  ]);
  return parts.map((p) => p.body).join('\n');
}
const stateOfA = () => stateOf(A);

describe('authorization matrix: operator routes', () => {
  const refused: Caller[] = [
    'unsigned',
    'unknown-key',
    'wrong-secret',
    'expired',
    'other-region',
    'other-client',
  ];

  it.each(refused)('%s: 403 on every operator route of client A, and A unchanged', async (caller) => {
    const before = await stateOfA();
    for (const route of operatorRoutes) {
      // Cancel last: an allowed one would change the job for the routes after it.
      const answer = await call(
        caller,
        route.method,
        pathFor(route.path, A),
        bodyFor(route.method, route.path),
      );
      expect(answer.status, `${caller} ${route.method} ${route.path} → ${answer.text}`).toBe(403);
    }
    expect(await stateOfA()).toBe(before);
  });

  it("own-client: client B's operator passes the authorizer on every route of B, only of B", async () => {
    const ofAClient = operatorRoutes.filter((r) => r.path.includes('{clientId}'));
    for (const route of ofAClient.filter((r) => !r.path.endsWith('/cancel'))) {
      const answer = await call(
        'own-client',
        route.method,
        pathFor(route.path, B),
        bodyFor(route.method, route.path),
      );
      expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).not.toBe(403);
      expect(answer.status).toBeLessThan(500);
    }
    // The policy names B exactly: a client whose id starts with B's is another client.
    expect((await call('own-client', 'GET', `/clients/${B}x`)).status).toBe(403);
    // Nor the list of every client.
    expect((await call('own-client', 'GET', '/clients')).status).toBe(403);
  });

  it('admin: the local credentials pass on every route of A', async () => {
    for (const route of operatorRoutes.filter((r) => !r.path.endsWith('/cancel'))) {
      const answer = await call(
        'admin',
        route.method,
        pathFor(route.path, A),
        bodyFor(route.method, route.path),
      );
      expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).not.toBe(403);
      expect(answer.status).toBeLessThan(500);
    }
  });
});

describe('authorization matrix: public routes', () => {
  it("a webhook signed with another channel's secret, or none, is a 401; an unknown channel a 404", async () => {
    await stack.putChannel({
      channelId: 'tenant-b-channel',
      clientId: B,
      channelSecret: 'tenant-b-channel-secret',
      accessToken: 'tenant-b-token',
    });
    const body = JSON.stringify({ destination: 'U0', events: [] });
    const post = (channelId: string, signature?: string) =>
      fetch(stack.webhookUrl(channelId), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(signature ? { 'x-line-signature': signature } : {}),
        },
        body,
      });
    expect((await post('tenant-b-channel', signBody(body, DEMO_CHANNEL.channelSecret))).status).toBe(401);
    expect((await post(DEMO_CHANNEL.channelId, signBody(body, 'tenant-b-channel-secret'))).status).toBe(401);
    expect((await post('tenant-b-channel')).status).toBe(401);
    expect((await post('tenant-b-channel', signBody(body, 'tenant-b-channel-secret'))).status).toBe(200);
    // No such channel: nothing to verify against, nothing queued.
    expect((await post('no-such-channel', signBody(body, 'tenant-b-channel-secret'))).status).toBe(404);
  });

  it("a call-status callback signed with anything but the provider's secret is a 401; another provider's path a 404", async () => {
    const body = JSON.stringify({ callId: 'c1', status: 'completed' });
    const now = Math.floor(Date.now() / 1000);
    const post = (provider: string, signature?: string) =>
      fetch(`${stack.api.url}/providers/${provider}/calls/status?job=j&task=t&attempt=1`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(signature ? { 'x-switchboard-signature': signature } : {}),
        },
        body,
      });
    expect((await post(LOCAL_TELEPHONY.provider)).status).toBe(401);
    expect(
      (await post(LOCAL_TELEPHONY.provider, signCallback('tenant-b-channel-secret', body, now))).status,
    ).toBe(401);
    expect(
      (await post(LOCAL_TELEPHONY.provider, signCallback(LOCAL_TELEPHONY.callbackSecret, body, now - 3_600)))
        .status,
    ).toBe(401);
    // Twilio's route takes only X-Twilio-Signature, made with a client's auth token: this one is forged.
    expect((await post('twilio', signCallback(LOCAL_TELEPHONY.callbackSecret, body, now))).status).toBe(401);
    expect((await post('vonage', signCallback(LOCAL_TELEPHONY.callbackSecret, body, now))).status).toBe(404);
  });
});

describe('authorization matrix: console routes (user pool tokens)', () => {
  const consoleRoutes = routes.filter((r) => r.auth === 'jwt' && r.path.includes('{clientId}'));
  const signIn = async (username: string) => (await stack.cognito.issueTokens(username)).AccessToken;
  const consoleCall = async (token: string | undefined, method: string, path: string, body?: string) => {
    const response = await fetch(`${stack.api.url}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      ...(body === undefined ? {} : { body }),
    });
    return { status: response.status, text: await response.text(), headers: response.headers };
  };
  const stateOfB = () => stateOf(B);

  it('the console API mirrors every operator route under /console/api', () => {
    const operatorPaths = routes.filter((r) => r.auth === 'iam').map((r) => `${r.method} ${r.path}`);
    const mirrored = routes.filter((r) => r.auth === 'jwt' && r.path !== `${CONSOLE_API_PREFIX}/me`);
    expect(mirrored.map((r) => `${r.method} ${r.path.slice(CONSOLE_API_PREFIX.length)}`).sort()).toEqual(
      operatorPaths.sort(),
    );
  });

  it('a user of client A: 403 on every console route of client B, and B unchanged', async () => {
    const token = await signIn('user-a');
    const before = await stateOfB();
    for (const route of consoleRoutes) {
      const answer = await consoleCall(
        token,
        route.method,
        pathFor(route.path, B),
        bodyFor(route.method, route.path),
      );
      expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).toBe(403);
    }
    expect(await stateOfB()).toBe(before);
    // Read, create (a client of that id), pause, report, in words a user understands.
    const refused = await consoleCall(
      token,
      'GET',
      `${CONSOLE_API_PREFIX}/clients/${B}/jobs/${jobOf[B]}/report`,
    );
    expect(JSON.parse(refused.text)).toEqual({ message: `Forbidden: you do not belong to client ${B}` });
  });

  it('a user of client A passes on every console route of A; a user of no client on none', async () => {
    const token = await signIn('user-a');
    for (const route of consoleRoutes.filter((r) => !r.path.endsWith('/cancel'))) {
      const answer = await consoleCall(
        token,
        route.method,
        pathFor(route.path, A),
        bodyFor(route.method, route.path),
      );
      expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).not.toBe(403);
      expect(answer.status).not.toBe(401);
      expect(answer.status).toBeLessThan(500);
    }
    const nobody = await signIn('nobody');
    expect((await consoleCall(nobody, 'GET', `${CONSOLE_API_PREFIX}/clients/${A}`)).status).toBe(403);
    expect(JSON.parse((await consoleCall(nobody, 'GET', `${CONSOLE_API_PREFIX}/me`)).text)).toEqual({
      username: 'nobody',
      admin: false,
      clients: [],
      roles: {},
    });
  });

  it('only an administrator lists every client; a user of clients is refused the list', async () => {
    const list = `${CONSOLE_API_PREFIX}/clients`;
    const refused = await consoleCall(await signIn('user-ab'), 'GET', list);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.text)).toEqual({ message: 'Forbidden: only administrators list every client' });
    const all = await consoleCall(await signIn('boss'), 'GET', list);
    expect(all.status, all.text).toBe(200);
    const ids = (JSON.parse(all.text) as { clients: { clientId: string }[] }).clients.map((c) => c.clientId);
    expect(ids).toEqual(expect.arrayContaining([A, B]));
    expect(ids).toEqual([...ids].sort());
  });

  it.each([
    ['viewer-a', 'viewer'],
    ['operator-a', 'operator'],
    ['legacy-a', 'operator'],
    ['user-a', 'admin'],
  ] as const)(
    '%s (%s of A): every console route of A answered exactly when its role allows it; a refusal changes nothing',
    async (user, role) => {
      const token = await signIn(user);
      const rank = (r: string) => ['viewer', 'operator', 'admin'].indexOf(r);
      const ofA = consoleRoutes.filter((r) => !r.path.endsWith('/cancel'));
      const refused = ofA.filter((r) => rank(r.role!) > rank(role));
      const allowed = ofA.filter((r) => rank(r.role!) <= rank(role));
      expect(refused.length + allowed.length).toBe(ofA.length);
      const before = await stateOfA();
      for (const route of refused) {
        const answer = await consoleCall(
          token,
          route.method,
          pathFor(route.path, A),
          bodyFor(route.method, route.path),
        );
        expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).toBe(403);
        expect(JSON.parse(answer.text)).toEqual({
          message: `Forbidden: you are ${role === 'viewer' ? 'a' : 'an'} ${role} of client ${A}; this needs ${route.role === 'viewer' ? 'a' : 'an'} ${route.role}`,
        });
      }
      expect(await stateOfA()).toBe(before);
      for (const route of allowed) {
        const answer = await consoleCall(
          token,
          route.method,
          pathFor(route.path, A),
          bodyFor(route.method, route.path),
        );
        expect(answer.status, `${route.method} ${route.path} → ${answer.text}`).not.toBe(403);
        expect(answer.status).toBeLessThan(500);
      }
    },
  );

  it('every operator route names its role: reads for viewers, settings and channels for admins', () => {
    const byRole = (role: string) =>
      routes
        .filter((r) => r.auth === 'iam' && r.role === role)
        .map((r) => `${r.method} ${r.path}`)
        .sort();
    expect(routes.filter((r) => r.auth === 'iam' && r.role === undefined)).toEqual([]);
    expect(byRole('viewer').every((key) => key.startsWith('GET '))).toBe(true);
    expect(byRole('admin')).toEqual([
      'POST /clients/{clientId}/channels/{channelId}/rotate-secret',
      'PUT /clients/{clientId}',
      'PUT /clients/{clientId}/channels/{channelId}',
    ]);
  });

  it('a user of two clients sees both in /me and may act for each', async () => {
    const token = await signIn('user-ab');
    const me = await consoleCall(token, 'GET', `${CONSOLE_API_PREFIX}/me`);
    // The highest role a user's groups give in each client.
    expect(JSON.parse(me.text)).toEqual({
      username: 'user-ab',
      admin: false,
      clients: [A, B].sort(),
      roles: { [A]: 'admin', [B]: 'operator' },
    });
    for (const clientId of [A, B]) {
      expect((await consoleCall(token, 'GET', `${CONSOLE_API_PREFIX}/clients/${clientId}`)).status).toBe(200);
    }
  });

  it('no token, an expired, a forged or another app client’s token: 401 before any Lambda runs', async () => {
    const path = `${CONSOLE_API_PREFIX}/clients/${A}`;
    const before = await stateOfB();
    const expired = (await stack.cognito.issueTokens('user-a', { issuedAt: Date.now() - 2 * 3_600_000 }))
      .AccessToken;
    const real = await signIn('user-a');
    // A real token whose groups are rewritten to B's: the signature no longer matches.
    const [header, , signature] = real.split('.');
    const claims = { ...decodeJwt(real), 'cognito:groups': [clientGroup(B, 'admin')] };
    const rewritten = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    // The same claims signed with a key the pool never published, under the pool's key id.
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    await exportJWK(publicKey);
    const forged = await new SignJWT({ ...decodeJwt(real) })
      .setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(real).kid! })
      .sign(privateKey);
    const otherClient = await new SignJWT({ ...decodeJwt(real), client_id: 'another-app-client' })
      .setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(real).kid! })
      .sign(privateKey);
    for (const [what, token] of [
      ['none', undefined],
      ['expired', expired],
      ['groups rewritten', rewritten],
      ['unknown key', forged],
      ['another app client', otherClient],
      ['not a JWT', 'not-a-token'],
    ] as const) {
      const answer = await consoleCall(token, 'PUT', path, JSON.stringify(CLIENT_SETTINGS));
      expect(answer.status, `${what} → ${answer.text}`).toBe(401);
      expect(JSON.parse(answer.text)).toEqual({ message: 'Unauthorized' });
      expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    expect((await consoleCall(expired, 'GET', path)).headers.get('www-authenticate')).toContain('expired');
    expect(await stateOfB()).toBe(before);
    // The real token itself passes.
    expect((await consoleCall(real, 'GET', path)).status).toBe(200);
  });

  it('a console token is not an IAM signature: the operator routes stay SigV4-only', async () => {
    const token = await signIn('user-a');
    const answer = await consoleCall(token, 'GET', `/clients/${A}`);
    expect(answer.status).toBe(403);
  });
});
