/**
 * Twilio: the signature on Twilio's documented example, callbacks read into status events whatever
 * order they come in, and the REST adapter against the Twilio emulator — Basic auth, form bodies,
 * Twilio's errors, and the lookup that keeps an ambiguous create from ringing twice.
 */
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ScriptedCall, TelephonyEmulator, TelephonyFaults } from '#local/telephony-sandbox.ts';
import { LOCAL_TWILIO, startTwilioEmulator } from '#local/twilio-emulator.ts';
import { TWILIO_LOOKUP_SETTLE_MS, TwilioTelephonyProvider } from '#shared/adapters/twilio-telephony.ts';
import type { CallLink } from '#shared/broker/ports.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import type { CallRequest, CallSnapshot, InitiateOutcome } from '#shared/telephony/port.ts';
import { mergeStatus } from '#shared/telephony/port.ts';
import { type TwilioSettings, telephonySettingsSchema } from '#shared/telephony/settings.ts';
import {
  parseForm,
  signedUrlForms,
  TWILIO_SIGNATURE_HEADER,
  twilioSignature,
  twilioStatusEvent,
  verifyTwilioSignature,
} from '#shared/telephony/twilio.ts';
import { ManualTime } from './manual-time.ts';

describe('X-Twilio-Signature', () => {
  // Twilio's documented example (docs/provider-facts.md B5): token 12345, this URL, five parameters.
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = (caller: string) =>
    parseForm(
      new URLSearchParams({
        CallSid: 'CA1234567890ABCDE',
        Caller: caller,
        Digits: '1234',
        From: caller,
        To: '+18005551212',
      }).toString(),
    );

  it('matches both published vectors', () => {
    expect(twilioSignature('12345', url, params('+12349013030'))).toBe('0/KCTR6DLpKmkAf8muzZqo1nDgQ=');
    expect(twilioSignature('12345', url, params('+14158675309'))).toBe('RSOYDt4T1cUTdK1PDd93/VVr8B8=');
  });

  it('counts a value repeated under one name once, as Twilio does', () => {
    const repeated: [string, string][] = [
      ['Sid', 'CA123'],
      ['Digits', '5678'],
      ['Digits', '1234'],
      ['Digits', '1234'],
    ];
    const once: [string, string][] = [
      ['Sid', 'CA123'],
      ['Digits', '1234'],
      ['Digits', '5678'],
    ];
    expect(twilioSignature('12345', url, repeated)).toBe(twilioSignature('12345', url, once));
    expect(twilioSignature('12345', url, repeated)).not.toBe(twilioSignature('12345', url, once.slice(0, 2)));
  });

  it('sorts names and repeated values by UTF-16 code units, as twilio-node does, not by UTF-8 bytes (issue 35 #5)', () => {
    // U+1F600 is the surrogate pair D83D DE00 (before FF21 in UTF-16), but F0 9F 98 80 in UTF-8 (after EF BC A1).
    const emoji = '\u{1F600}';
    const fullwidthA = '\uFF21';
    const signed = twilioSignature('12345', url, [
      ['Digits', fullwidthA],
      ['Digits', emoji],
      [`X${fullwidthA}`, '1'],
      [`X${emoji}`, '2'],
    ]);
    const utf16Order = `${url}Digits${emoji}Digits${fullwidthA}X${emoji}2X${fullwidthA}1`;
    expect(signed).toBe(createHmac('sha1', '12345').update(utf16Order, 'utf8').digest('base64'));
    const byteOrder = `${url}Digits${fullwidthA}Digits${emoji}X${fullwidthA}1X${emoji}2`;
    expect(signed).not.toBe(createHmac('sha1', '12345').update(byteOrder, 'utf8').digest('base64'));
  });

  it('verifies with or without the default port, and with the previous token during a rotation', () => {
    const header = twilioSignature(
      '12345',
      'https://mycompany.com:443/myapp.php?foo=1&bar=2',
      params('+12349013030'),
    );
    expect(() =>
      verifyTwilioSignature({
        header,
        urls: [url],
        params: params('+12349013030'),
        authTokens: ['new-token', '12345'],
      }),
    ).not.toThrow();
    expect(signedUrlForms('https://a.example/p?x=1')).toEqual([
      'https://a.example/p?x=1',
      'https://a.example:443/p?x=1',
    ]);
    expect(signedUrlForms('http://a.example:80/p')).toEqual(['http://a.example:80/p', 'http://a.example/p']);
  });

  it("refuses a request signed with a Webhook Setting's key (HMAC-SHA256), saying why", () => {
    const p = params('+12349013030');
    const header = twilioSignature('12345', url, p);
    expect(() =>
      verifyTwilioSignature({
        header,
        urls: [url],
        params: p,
        authTokens: ['12345'],
        settings: 'key=KSxxxxxxxx,algorithm=HMAC_SHA256',
      }),
    ).toThrow(
      /X-Twilio-Webhooks-Signature-Settings \(key=…,algorithm=HMAC_SHA256\): .*remove the Webhook Rule/,
    );
  });

  it('refuses a missing header, another token, another URL and a changed parameter', () => {
    const p = params('+12349013030');
    const header = twilioSignature('12345', url, p);
    expect(() =>
      verifyTwilioSignature({ header: undefined, urls: [url], params: p, authTokens: ['12345'] }),
    ).toThrow(/missing/);
    expect(() => verifyTwilioSignature({ header, urls: [url], params: p, authTokens: ['54321'] })).toThrow(
      /does not match/,
    );
    expect(() =>
      verifyTwilioSignature({
        header,
        urls: ['https://mycompany.com/myapp.php?foo=1&bar=3'],
        params: p,
        authTokens: ['12345'],
      }),
    ).toThrow(/does not match/);
    const changed = p.map(([k, v]) => [k, k === 'Digits' ? '9' : v] as const);
    expect(() =>
      verifyTwilioSignature({ header, urls: [url], params: changed, authTokens: ['12345'] }),
    ).toThrow(/does not match/);
  });

  it('sorts the values of a repeated parameter, as Twilio does', () => {
    const a = twilioSignature('t', url, [
      ['StatusCallbackEvent', 'ringing'],
      ['StatusCallbackEvent', 'answered'],
    ]);
    const b = twilioSignature('t', url, [
      ['StatusCallbackEvent', 'answered'],
      ['StatusCallbackEvent', 'ringing'],
    ]);
    expect(a).toBe(b);
  });
});

describe('Twilio status callbacks as call events', () => {
  const sid = `CA${'a'.repeat(32)}`;
  const form = (fields: Record<string, string>) =>
    parseForm(
      new URLSearchParams({ CallSid: sid, AccountSid: LOCAL_TWILIO.accountSid, ...fields }).toString(),
    );

  it('maps statuses, talk time, the answering machine and the reasons', () => {
    const now = Date.parse('2026-01-05T09:00:00Z');
    const at = 'Mon, 05 Jan 2026 09:00:07 +0000';
    expect(twilioStatusEvent(form({ CallStatus: 'initiated', SequenceNumber: '0' }), 'k', now)).toMatchObject(
      {
        status: 'ringing',
        sequence: 1,
      },
    );
    expect(
      twilioStatusEvent(form({ CallStatus: 'in-progress', SequenceNumber: '2', Timestamp: at }), 'k', now),
    ).toMatchObject({
      status: 'answered',
      at: '2026-01-05T09:00:07.000Z',
      sequence: 3,
    });
    expect(
      twilioStatusEvent(form({ CallStatus: 'completed', CallDuration: '42', SequenceNumber: '3' }), 'k', now),
    ).toMatchObject({
      status: 'completed',
      durationSeconds: 42,
    });
    expect(
      twilioStatusEvent(
        form({ CallStatus: 'completed', AnsweredBy: 'machine_end_beep', CallDuration: '20' }),
        'k',
        now,
      ),
    ).toMatchObject({ status: 'voicemail', reason: 'answered by machine_end_beep' });
    // A fax is failed (not retried as voicemail), as Amazon Connect's FAX_MACHINE_DETECTED is.
    expect(
      twilioStatusEvent(form({ CallStatus: 'completed', AnsweredBy: 'fax', CallDuration: '5' }), 'k', now),
    ).toMatchObject({ status: 'failed', reason: 'answered by fax' });
    expect(twilioStatusEvent(form({ CallStatus: 'busy' }), 'k', now).status).toBe('busy');
    expect(
      twilioStatusEvent(form({ CallStatus: 'no-answer', SipResponseCode: '487' }), 'k', now).status,
    ).toBe('no-answer');
    expect(twilioStatusEvent(form({ CallStatus: 'failed', SipResponseCode: '404' }), 'k', now)).toMatchObject(
      {
        status: 'failed',
        reason: 'failed (SIP 404)',
      },
    );
    expect(twilioStatusEvent(form({ CallStatus: 'canceled' }), 'k', now).status).toBe('failed');
  });

  it('refuses what is not a call status callback', () => {
    expect(() => twilioStatusEvent(parseForm('CallStatus=completed'), 'k', 0)).toThrow(/CallSid/);
    expect(() => twilioStatusEvent(form({}), 'k', 0)).toThrow(/CallStatus/);
    expect(() => twilioStatusEvent(form({ CallStatus: 'exploded' }), 'k', 0)).toThrow(
      /unknown Twilio call status/,
    );
  });

  it('ends in the same state whatever order and however often the callbacks come', () => {
    const events = [
      form({ CallStatus: 'initiated', SequenceNumber: '0' }),
      form({ CallStatus: 'ringing', SequenceNumber: '1' }),
      form({ CallStatus: 'in-progress', SequenceNumber: '2' }),
      form({ CallStatus: 'completed', SequenceNumber: '3', CallDuration: '30' }),
    ].map((f) => twilioStatusEvent(f, 'k', 0));
    const orders = [
      [0, 1, 2, 3],
      [3, 2, 1, 0],
      [1, 3, 0, 2, 3, 1],
      [2, 2, 0, 3, 3],
    ];
    for (const order of orders) {
      let state: CallSnapshot | undefined;
      for (const i of order) state = mergeStatus(state, events[i]!);
      expect(state).toMatchObject({ status: 'completed', durationSeconds: 30 });
    }
    let partial: CallSnapshot | undefined;
    for (const i of [2, 1, 0]) partial = mergeStatus(partial, events[i]!);
    expect(partial?.status).toBe('answered');
  });
});

describe('Twilio settings', () => {
  const good = {
    provider: 'twilio',
    accountSid: LOCAL_TWILIO.accountSid,
    from: LOCAL_TWILIO.from,
    voiceUrl: 'https://bot.example/twiml',
  };

  it('accepts an account, a caller id and what an answered call runs', () => {
    expect(telephonySettingsSchema.safeParse(good).success).toBe(true);
  });

  it('names the field of each mistake', () => {
    const paths = (input: unknown) =>
      (telephonySettingsSchema.safeParse(input).error?.issues ?? []).map((i) => i.path.join('.'));
    expect(paths({ ...good, accountSid: 'AC123' })).toEqual(['accountSid']);
    expect(paths({ ...good, from: '0312345678' })).toEqual(['from']);
    expect(paths({ ...good, voiceUrl: undefined })).toEqual(['voiceUrl']);
    expect(paths({ ...good, applicationSid: `AP${'0'.repeat(32)}` })).toEqual(['voiceUrl']);
    expect(paths({ ...good, authToken: 'secret' })).toEqual(['']);
  });
});

describe('Twilio adapter against the Twilio emulator', () => {
  let emulator: TelephonyEmulator | undefined;
  let receiver: Server | undefined;
  let time: ManualTime;
  let posts: { url: string; signature: string; body: string }[];
  let links: Map<string, CallLink>;

  afterEach(async () => {
    await emulator?.stop();
    emulator = undefined;
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
    receiver = undefined;
  });

  const settings: TwilioSettings = {
    provider: 'twilio',
    accountSid: LOCAL_TWILIO.accountSid,
    from: LOCAL_TWILIO.from,
    voiceUrl: LOCAL_TWILIO.voiceUrl,
    machineDetection: 'Enable',
  };

  async function start(
    options: { overrides?: Record<string, ScriptedCall>; faults?: Partial<TelephonyFaults> } = {},
    authToken: string | null = LOCAL_TWILIO.authToken,
  ) {
    time = new ManualTime();
    posts = [];
    links = new Map();
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      req.on('end', () => {
        posts.push({
          url: `http://127.0.0.1:${(receiver!.address() as AddressInfo).port}${req.url}`,
          signature: String(req.headers[TWILIO_SIGNATURE_HEADER.toLowerCase()]),
          body,
        });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver!.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as AddressInfo).port;
    emulator = await startTwilioEmulator({ time, ringSeconds: 5, durationSeconds: 60, ...options });
    return new TwilioTelephonyProvider({
      settings,
      apiUrl: emulator.url,
      callbackUrl: `http://127.0.0.1:${port}/providers/twilio/calls/status`,
      clientId: 'c1',
      authToken: async () => authToken ?? undefined,
      links: { find: async (callId) => links.get(callId) },
      clock: { now: () => time.now() },
    });
  }

  let counter = 0;
  function request(to: string, overrides: Partial<CallRequest> = {}): CallRequest {
    return {
      to,
      clientId: 'c1',
      jobId: 'job-1',
      taskId: `task-${++counter}`,
      attempt: 1,
      startedAt: time.now(),
      ringTimeoutSeconds: 30,
      callbackUrl: 'https://unused.example/cb',
      maxDurationSeconds: 600,
      variables: {},
      ...overrides,
    };
  }
  const keyOf = (r: CallRequest) => attemptKey(r.jobId, r.taskId, r.attempt);

  /**
   * Runs the emulator's timers until none is left and every callback post (real loopback I/O)
   * has been answered. The deadline is against a hang, not a speed requirement.
   */
  async function settle(): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (time.pendingTimers > 0 || emulator!.pending().callbacksInFlight > 0) {
      if (Date.now() > deadline)
        throw new Error('the emulator did not settle: timers or callbacks still pending');
      time.runAll();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  it('places a call whose signed callbacks name the attempt and end it as the REST API says', async () => {
    const provider = await start({
      overrides: { '+815011110001': { outcome: 'answered', ringSeconds: 4, durationSeconds: 42 } },
    });
    const call = request('+815011110001');
    const outcome = await provider.initiate(call, keyOf(call));
    expect(outcome).toMatchObject({ kind: 'accepted', duplicate: false });
    const sid = (outcome as { callId: string }).callId;
    expect(sid).toMatch(/^CA[0-9a-f]{32}$/);
    await settle();
    expect(await provider.getCall(sid)).toMatchObject({ status: 'completed', durationSeconds: 42 });
    // initiated (asked for by the adapter), ringing, in-progress, completed: numbered from 0 (issue 35 #5).
    expect(posts.length).toBe(4);
    const progress = posts
      .map((post) => Object.fromEntries(parseForm(post.body)))
      .map((p) => [Number(p.SequenceNumber), p.CallStatus])
      .sort(([a], [b]) => Number(a) - Number(b));
    expect(progress).toEqual([
      [0, 'initiated'],
      [1, 'ringing'],
      [2, 'in-progress'],
      [3, 'completed'],
    ]);
    let state: CallSnapshot | undefined;
    for (const post of posts) {
      const params = parseForm(post.body);
      verifyTwilioSignature({
        header: post.signature,
        urls: [post.url],
        params,
        authTokens: [LOCAL_TWILIO.authToken],
      });
      const query = new URL(post.url).searchParams;
      expect(Object.fromEntries(query)).toEqual({
        client: 'c1',
        job: 'job-1',
        task: call.taskId,
        attempt: '1',
      });
      state = mergeStatus(state, twilioStatusEvent(params, keyOf(call), time.now()));
    }
    expect(state).toMatchObject({ callId: sid, status: 'completed', durationSeconds: 42 });
  });

  it('answers a create with the call queued, as Twilio does (issue 35 #5)', async () => {
    await start();
    const created = await fetch(
      `${emulator!.url}/2010-04-01/Accounts/${LOCAL_TWILIO.accountSid}/Calls.json`,
      {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${LOCAL_TWILIO.accountSid}:${LOCAL_TWILIO.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({
          To: '+815011110001',
          From: LOCAL_TWILIO.from,
          Url: LOCAL_TWILIO.voiceUrl,
        }).toString(),
      },
    );
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ status: 'queued', start_time: null });
  });

  it('maps busy, no answer, a failed number and an answering machine (AMD on)', async () => {
    const overrides: Record<string, ScriptedCall> = {
      '+815011110003': { outcome: 'busy' },
      '+815011110004': { outcome: 'no-answer', ringSeconds: 40 },
      '+815011110005': { outcome: 'failed' },
      '+815011110006': { outcome: 'machine', durationSeconds: 20 },
    };
    const provider = await start({ overrides });
    const sids: string[] = [];
    for (const to of Object.keys(overrides)) {
      const call = request(to);
      sids.push(((await provider.initiate(call, keyOf(call))) as { callId: string }).callId);
    }
    await settle();
    const statuses = await Promise.all(sids.map(async (sid) => (await provider.getCall(sid))?.status));
    expect(statuses).toEqual(['busy', 'no-answer', 'failed', 'voicemail']);
  });

  it('an ambiguous create (500 after the call exists) is found by its lookup, not placed again', async () => {
    const provider = await start({ faults: { initiateErrorAfterCreateRate: 1 } });
    const call = request('+815011110007');
    const first = await provider.initiate(call, keyOf(call));
    expect(first.kind).toBe('retryable');
    emulator!.setFaults({ initiateErrorAfterCreateRate: 0 });
    // Too soon to look: the broker is told to wait, and nothing is sent.
    const soon = await provider.initiate(call, keyOf(call), { maybePlaced: true });
    expect(soon).toMatchObject({ kind: 'rate-limited' });
    expect((soon as { retryAfterMs: number }).retryAfterMs).toBeLessThanOrEqual(TWILIO_LOOKUP_SETTLE_MS);
    time.advance(TWILIO_LOOKUP_SETTLE_MS);
    const found = await provider.initiate(call, keyOf(call), { maybePlaced: true });
    expect(found).toMatchObject({ kind: 'accepted', duplicate: true });
    expect(emulator!.stats('c1').rings).toBe(1);
    expect(emulator!.stats('c1').repeatedRings).toEqual([]);
  });

  it('a create refused before the call existed (503) is placed on the retry, once', async () => {
    const provider = await start({ faults: { initiateErrorRate: 1 } });
    const call = request('+815011110008');
    expect((await provider.initiate(call, keyOf(call))).kind).toBe('retryable');
    emulator!.setFaults({ initiateErrorRate: 0 });
    time.advance(TWILIO_LOOKUP_SETTLE_MS);
    expect(await provider.initiate(call, keyOf(call), { maybePlaced: true })).toMatchObject({
      kind: 'accepted',
      duplicate: false,
    });
    expect(emulator!.stats('c1').rings).toBe(1);
  });

  it("a found call linked to another attempt is not this attempt's", async () => {
    const provider = await start();
    const other = request('+815011110009');
    const placed = (await provider.initiate(other, keyOf(other))) as { callId: string };
    links.set(placed.callId, { clientId: 'c1', jobId: other.jobId, taskId: other.taskId, attempt: 1 });
    const mine = request('+815011110009');
    const outcome = await provider.initiate(mine, keyOf(mine), { maybePlaced: true });
    expect(outcome).toMatchObject({ kind: 'accepted', duplicate: false });
    expect((outcome as { callId: string }).callId).not.toBe(placed.callId);
  });

  it("Twilio's refusals are final and named; throttling waits; a hang-up ends the call", async () => {
    const provider = await start({
      overrides: { '+815011110010': { outcome: 'answered', ringSeconds: 1, durationSeconds: 300 } },
    });
    const bad = request('0312345678');
    expect(await provider.initiate(bad, keyOf(bad))).toMatchObject({
      kind: 'rejected',
      status: 400,
      code: 'twilio_21211',
    });
    emulator!.setFaults({ rateLimitRate: 1 });
    const throttled = request('+815011110011');
    expect(await provider.initiate(throttled, keyOf(throttled))).toMatchObject({ kind: 'rate-limited' });
    emulator!.setFaults({ rateLimitRate: 0 });
    const call = request('+815011110010');
    const { callId } = (await provider.initiate(call, keyOf(call))) as { callId: string };
    time.advance(2_000);
    expect(await provider.hangUp(callId)).toBe(true);
    expect(await provider.hangUp(callId)).toBe(false);
    expect((await provider.getCall(callId))?.status).toBe('completed');
    expect(await provider.getCall(`CA${'0'.repeat(32)}`)).toBeUndefined();
  });

  it('wrong or missing credentials fail the call with the reason, nothing rings', async () => {
    const wrong = await start({}, 'not-the-token-0000000000000000000');
    const call = request('+815011110012');
    const outcome: InitiateOutcome = await wrong.initiate(call, keyOf(call));
    expect(outcome).toMatchObject({ kind: 'rejected', status: 401, code: 'twilio_20003' });
    await emulator!.stop();
    const none = await start({}, null);
    expect(await none.initiate(call, keyOf(call))).toMatchObject({
      kind: 'rejected',
      code: 'twilio_no_auth_token',
    });
    expect(emulator!.stats('c1').rings).toBe(0);
  });
});
