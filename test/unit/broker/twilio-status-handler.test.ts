/**
 * `POST /providers/twilio/calls/status` as API Gateway delivers it: a form body signed with the
 * client's auth token over the URL Twilio was given (behind a custom domain: the configured public
 * URL), in any order and more than once; forged, foreign and malformed callbacks change nothing.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeCallStatusHandler } from '#lambdas/call-status/handler.ts';
import { lambdaContext } from '#local/lambda.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { makeRecordTwilioStatus } from '#shared/broker/twilio-status.ts';
import { silentLogger } from '#shared/log.ts';
import { CallbackSecretNotSetError } from '#shared/telephony/callback-secrets.ts';
import { rfc2822, twilioSignature } from '#shared/telephony/twilio.ts';
import { MemoryLeaseStore } from '../../support/memory-lease-store.ts';
import { clientSettings, job, MemoryTaskStore, tasksFor } from './fakes.ts';

const NOW = Date.parse('2026-03-02T01:01:00Z');
const TOKENS: Record<string, string> = {
  c1: 'c1-auth-token-000000000000000000',
  c2: 'c2-auth-token-000000000000000000',
};
const PUBLIC_URL = 'https://calls.acme.example/providers/twilio/calls/status';
const SID = `CA${'b'.repeat(32)}`;

function setup() {
  const clock = { now: () => NOW };
  const store = new MemoryTaskStore(new MemoryLeaseStore(), clock);
  const j1 = job();
  const j2 = job({ clientId: 'c2', jobId: '01JOB0000000000000000000BB' });
  const [t1] = tasksFor(j1, 1);
  const [t2] = tasksFor(j2, 1);
  store.add(clientSettings(), j1, [{ ...t1!, state: 'in-flight', attempts: 1, startedAt: NOW - 60_000 }]);
  store.add(clientSettings({ clientId: 'c2' }), j2, [
    { ...t2!, state: 'in-flight', attempts: 1, startedAt: NOW - 60_000 },
  ]);
  const suppressed: { clientId: string; recipient: string }[] = [];
  const settle = {
    tasks: store,
    leases: { endpointOf: async () => 'http://10.0.0.7:8080' },
    notifier: { callEnded: async () => {} },
    clock,
    suppressions: {
      add: async (clientId: string, entries: readonly { recipient: string }[]) => {
        for (const { recipient } of entries) suppressed.push({ clientId, recipient });
      },
    },
  };
  // The broker's links: the call SID of each client's task, to its attempt.
  const links = new Map([
    [SID, { clientId: 'c1', jobId: j1.jobId, taskId: t1!.taskId, attempt: 1 }],
    [`CA${'d'.repeat(32)}`, { clientId: 'c2', jobId: j2.jobId, taskId: t2!.taskId, attempt: 1 }],
  ]);
  const handler = makeCallStatusHandler({
    provider: 'sandbox',
    record: makeRecordCallStatus({ ...settle, secrets: 'unused-sandbox-secret' }),
    twilio: {
      record: makeRecordTwilioStatus({
        ...settle,
        authTokens: async (clientId) => {
          const token = TOKENS[clientId];
          if (!token) throw new CallbackSecretNotSetError(`no token for ${clientId}`);
          return [token];
        },
        links: { find: async (callId) => links.get(callId) },
      }),
      publicUrl: PUBLIC_URL,
    },
    log: silentLogger,
  });
  const task = (clientId: string) => store.all().find((t) => t.clientId === clientId)!;
  return { store, handler, task, j1, j2, suppressed };
}

interface Callback {
  readonly query: Record<string, string>;
  readonly params: Record<string, string>;
  /** Who signs: a client's token, another string, or nobody. */
  readonly signWith?: string | null;
  /** The URL signed (default: the public URL with the query). */
  readonly signedUrl?: string;
  readonly base64?: boolean;
}

function event(callback: Callback): APIGatewayProxyEventV2 {
  const rawQueryString = new URLSearchParams(callback.query).toString();
  const body = new URLSearchParams(callback.params).toString();
  const url = callback.signedUrl ?? `${PUBLIC_URL}?${rawQueryString}`;
  const signature =
    callback.signWith === null
      ? undefined
      : twilioSignature(callback.signWith ?? TOKENS[callback.query.client ?? 'c1']!, url, [
          ...new URLSearchParams(body),
        ]);
  return {
    version: '2.0',
    routeKey: 'POST /providers/{provider}/calls/status',
    rawPath: '/providers/twilio/calls/status',
    rawQueryString,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      host: 'abc123.execute-api.ap-northeast-1.amazonaws.com',
      'x-forwarded-proto': 'https',
      ...(signature ? { 'x-twilio-signature': signature } : {}),
    },
    queryStringParameters: callback.query,
    pathParameters: { provider: 'twilio' },
    requestContext: {
      domainName: 'abc123.execute-api.ap-northeast-1.amazonaws.com',
      http: { method: 'POST', path: '/providers/twilio/calls/status' },
    } as APIGatewayProxyEventV2['requestContext'],
    body: callback.base64 ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: callback.base64 === true,
  } as APIGatewayProxyEventV2;
}

function status(callStatus: string, sequence: number, more: Record<string, string> = {}) {
  return {
    AccountSid: `AC${'c'.repeat(32)}`,
    ApiVersion: '2010-04-01',
    CallSid: SID,
    CallStatus: callStatus,
    From: '+815000000001',
    To: '+819012345678',
    Direction: 'outbound-api',
    SequenceNumber: String(sequence),
    Timestamp: rfc2822(NOW - 1_000),
    CallbackSource: 'call-progress-events',
    ...more,
  };
}

describe('the Twilio status route', () => {
  it('settles on a signed completed callback (signed over the custom domain), once; late and repeated ones change nothing', async () => {
    const s = setup();
    const query = { client: 'c1', job: s.j1.jobId, task: s.task('c1').taskId, attempt: '1' };
    const invoke = async (callback: Callback) =>
      (await s.handler(
        event(callback),
        lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
      )) as APIGatewayProxyStructuredResultV2;
    const outcome = async (callback: Callback) =>
      JSON.parse((await invoke(callback)).body!).outcome as string;

    expect(await outcome({ query, params: status('in-progress', 2), base64: true })).toBe('progress');
    expect(s.task('c1').callId).toBe(SID);
    expect(await outcome({ query, params: status('completed', 3, { CallDuration: '42' }) })).toBe('settled');
    expect(s.task('c1')).toMatchObject({ state: 'completed', callId: SID });
    expect(await outcome({ query, params: status('completed', 3, { CallDuration: '42' }) })).toBe(
      'already-settled',
    );
    expect(await outcome({ query, params: status('ringing', 1) })).toBe('stale');
    expect(s.task('c1').state).toBe('completed');
  });

  it('accepts the URL as API Gateway saw it, with or without :443', async () => {
    const s = setup();
    const query = { client: 'c1', job: s.j1.jobId, task: s.task('c1').taskId, attempt: '1' };
    const seen = `https://abc123.execute-api.ap-northeast-1.amazonaws.com:443/providers/twilio/calls/status?${new URLSearchParams(query)}`;
    const answer = (await s.handler(
      event({ query, params: status('busy', 3), signedUrl: seen }),
      lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
    expect(answer.statusCode).toBe(200);
    expect(s.task('c1').lastResult).toBe('busy');
  });

  it('a forged, unsigned or unverifiable callback is a 401 and settles nothing', async () => {
    const s = setup();
    const query = { client: 'c1', job: s.j1.jobId, task: s.task('c1').taskId, attempt: '1' };
    const cases: Callback[] = [
      { query, params: status('completed', 3), signWith: null },
      { query, params: status('completed', 3), signWith: 'not-the-auth-token-00000000000000' },
      { query, params: status('completed', 3), signedUrl: `${PUBLIC_URL}?client=c1` },
      { query: { ...query, client: 'nobody' }, params: status('completed', 3), signWith: TOKENS.c1 },
      {
        query: { job: query.job, task: query.task, attempt: '1' },
        params: status('completed', 3),
        signWith: TOKENS.c1,
      },
    ];
    for (const callback of cases) {
      const answer = (await s.handler(
        event(callback),
        lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
      )) as APIGatewayProxyStructuredResultV2;
      expect(answer.statusCode).toBe(401);
    }
    expect(s.task('c1').state).toBe('in-flight');
  });

  it("one client's token never settles another client's task; a signed malformed callback is a 400", async () => {
    const s = setup();
    const foreign = { client: 'c1', job: s.j2.jobId, task: s.task('c2').taskId, attempt: '1' };
    const answer = (await s.handler(
      event({ query: foreign, params: status('completed', 3) }),
      lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
    expect(answer.statusCode).toBe(200);
    expect(JSON.parse(answer.body!).outcome).toBe('unknown-task');
    expect(s.task('c2').state).toBe('in-flight');

    const query = { client: 'c1', job: s.j1.jobId, task: s.task('c1').taskId, attempt: '1' };
    const malformed = (await s.handler(
      event({ query, params: { CallStatus: 'completed', CallSid: 'not-a-sid' } }),
      lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
    expect(malformed.statusCode).toBe(400);
    expect(s.task('c1').state).toBe('in-flight');
  });

  it("answers a Gather's action request with TwiML, and opts the person out on 9 by the call's link", async () => {
    const s = setup();
    const gather = async (query: Record<string, string>, digits: string, callSid = SID) =>
      (await s.handler(
        event({ query, params: { ...status('in-progress', 2), CallSid: callSid, Digits: digits } }),
        lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
      )) as APIGatewayProxyStructuredResultV2;
    // The client's TwiML names only the client: the attempt is the call's link.
    const answer = await gather({ client: 'c1' }, '9');
    expect(answer.statusCode).toBe(200);
    expect(answer.headers?.['content-type']).toMatch(/^text\/xml/);
    expect(answer.body).toBe('<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>');
    expect(s.suppressed).toEqual([{ clientId: 'c1', recipient: s.task('c1').recipient }]);
    // Another key, another client's call, an unknown call: TwiML still, nobody suppressed.
    for (const [query, digits, sid] of [
      [{ client: 'c1' }, '1', SID],
      [{ client: 'c1' }, '9', `CA${'d'.repeat(32)}`],
      [{ client: 'c1' }, '9', `CA${'e'.repeat(32)}`],
    ] as const) {
      const other = await gather(query, digits, sid);
      expect([other.statusCode, other.body]).toEqual([200, answer.body]);
    }
    expect(s.suppressed).toHaveLength(1);
    // Unsigned: refused as any callback is.
    const forged = (await s.handler(
      event({
        query: { client: 'c1' },
        params: { ...status('in-progress', 2), Digits: '9' },
        signWith: null,
      }),
      lambdaContext({ functionName: 'call-status', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
    expect(forged.statusCode).toBe(401);
    expect(s.task('c1').state).toBe('in-flight');
  });
});
