/**
 * The unsubscribe link's handler (`lambdas/unsubscribe/handler.ts`) on API Gateway v2 events, with
 * the real use case, the real keyring (test keys) and an in-memory suppression list: what a reader,
 * a mail provider and a mail scanner each get, and that nothing but a valid one-click POST changes
 * the list.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { makeUnsubscribeHandler, ONE_CLICK_DONE_TEXT } from '#lambdas/unsubscribe/handler.ts';
import { maskAddress, preferredLanguage, renderPage } from '#lambdas/unsubscribe/page.ts';
import { lambdaContext } from '#local/lambda.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { UnsubscribeKeyring, unsubscribeTokensFrom } from '#shared/adapters/unsubscribe-secret.ts';
import { OneClickUnsubscribe } from '#shared/email/one-click-unsubscribe.ts';
import { MAX_ONE_CLICK_BODY_BYTES, MAX_TOKEN_CHARS, UnsubscribeTokens } from '#shared/email/unsubscribe.ts';
import type { SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';

const DIR = path.join(import.meta.dirname, '../../fixtures/apigw/unsubscribe');
/** The keys the fixtures' token was signed with (see the fixtures' README). */
const KEYS = {
  current: 't2',
  t2: 'test-unsubscribe-key-two-0123456789abcdef',
  t1: 'test-unsubscribe-key-one-0123456789abcdef',
};
const TOKEN =
  't2.WyJhY21lIiwiam9iLTIwMjUtMDYiLCJ0YXJvQGV4YW1wbGUuY29tIiwxNzQ4ODU0ODAwXQ.MolGv0CclauVCu1PYXgvUQ';
const ADDRESS = 'taro@example.com';
const NOW = Date.parse('2025-06-02T09:01:40Z');

function fixture(name: string): APIGatewayProxyEventV2 {
  return JSON.parse(readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as APIGatewayProxyEventV2;
}

/** A fixture's request with another token in its path (as API Gateway would hand it over). */
function withToken(event: APIGatewayProxyEventV2, token: string): APIGatewayProxyEventV2 {
  const rawPath = `/unsubscribe/${token}`;
  return {
    ...event,
    rawPath,
    pathParameters: { token },
    requestContext: { ...event.requestContext, http: { ...event.requestContext.http, path: rawPath } },
  };
}

function withMethod(event: APIGatewayProxyEventV2, method: string): APIGatewayProxyEventV2 {
  return {
    ...event,
    requestContext: { ...event.requestContext, http: { ...event.requestContext.http, method } },
  };
}

class MemorySuppressions implements SuppressionWriter {
  readonly lists = new Map<string, Map<string, SuppressionEntry>>();
  writes = 0;
  async add(clientId: string, entries: readonly SuppressionEntry[]): Promise<void> {
    const list = this.lists.get(clientId) ?? new Map<string, SuppressionEntry>();
    for (const entry of entries) list.set(entry.recipient, entry);
    this.lists.set(clientId, list);
    this.writes += 1;
  }
  snapshot(): string {
    return JSON.stringify([...this.lists].map(([c, l]) => [c, [...l.values()]]));
  }
}

function setup(keys: Record<string, string> = KEYS) {
  const suppressions = new MemorySuppressions();
  const logs: string[] = [];
  const clock = { now: () => NOW };
  const keyring = new UnsubscribeKeyring(async () => JSON.stringify(keys), { clock });
  const handler = makeUnsubscribeHandler({
    unsubscribe: new OneClickUnsubscribe({ verifier: keyring, suppressions, clock }),
    log: new PowertoolsLog('unsubscribe', { write: (line) => logs.push(line) }),
  });
  const invoke = async (event: APIGatewayProxyEventV2) =>
    (await handler(
      event,
      lambdaContext({ functionName: 'unsubscribe', timeoutMs: 10_000 }),
    )) as APIGatewayProxyStructuredResultV2;
  return { suppressions, logs, invoke };
}

const header = (result: APIGatewayProxyStructuredResultV2, name: string) =>
  (result.headers as Record<string, string>)[name];

describe('GET: the confirm page', () => {
  it('shows the masked address and a button that POSTs the one-click body to the same URL; suppresses nothing', async () => {
    const { invoke, suppressions } = setup();
    const result = await invoke(fixture('get-confirm-ja'));
    expect(result.statusCode).toBe(200);
    const html = result.body ?? '';
    expect(html).toContain('t***@example.com');
    expect(html).not.toContain(ADDRESS);
    expect(html).toMatch(/<form method="post"[^>]*>/);
    expect(html).not.toMatch(/<form[^>]*action=/);
    expect(html).toContain('<input type="hidden" name="List-Unsubscribe" value="One-Click">');
    expect(html).toMatch(/<button type="submit">/);
    expect(suppressions.writes).toBe(0);
    expect(suppressions.lists.size).toBe(0);
  });

  it('is Japanese first for a reader who prefers Japanese, English first otherwise, with both shown', async () => {
    const { invoke } = setup();
    const ja = (await invoke(fixture('get-confirm-ja'))).body ?? '';
    expect(ja).toMatch(/^<!doctype html><html lang="ja">/);
    expect(ja.indexOf('<section lang="ja"')).toBeLessThan(ja.indexOf('<section lang="en"'));
    expect(ja).toContain('メールの配信を停止しますか？');
    expect(ja).toContain('Unsubscribe from these emails?');

    const event = fixture('get-confirm-ja');
    for (const [acceptLanguage, first] of [
      ['en-US,en;q=0.9', 'en'],
      ['fr-FR,fr;q=0.9', 'en'],
      ['fr;q=1, ja;q=0.5, en;q=0.4', 'ja'],
      ['en;q=0.8, ja-JP;q=0.9', 'ja'],
      ['ja;q=0', 'en'],
    ] as const) {
      const result = await invoke({
        ...event,
        headers: { ...event.headers, 'accept-language': acceptLanguage },
      });
      expect(result.body, acceptLanguage).toMatch(new RegExp(`^<!doctype html><html lang="${first}">`));
      expect(header(result, 'content-language')).toBe(first);
    }
    const { 'accept-language': _none, ...headers } = event.headers;
    expect((await invoke({ ...event, headers })).body).toMatch(/^<!doctype html><html lang="en">/);
  });

  it('labels the page for assistive technology: a lang per language, headings, a named form and button', async () => {
    const html = renderPage('confirm', 'ja', ADDRESS);
    expect(html).toContain('<section lang="ja" aria-labelledby="heading-ja"><h1 id="heading-ja">');
    expect(html).toContain('<section lang="en" aria-labelledby="heading-en"><h2 id="heading-en">');
    expect(html).toContain('<form method="post" aria-label="配信を停止する">');
    expect(html).toContain('<span lang="ja">配信を停止する</span> / <span lang="en">Unsubscribe</span>');
    expect(html).toContain('<title>配信停止の確認 / Confirm unsubscribe</title>');
  });

  it('sends strict security headers: no script, no frame, form posts to itself only, no caching, no referrer', async () => {
    const { invoke } = setup();
    const result = await invoke(fixture('get-confirm-ja'));
    const csp = header(result, 'content-security-policy') ?? '';
    expect(csp).toMatch(/^default-src 'none'; /);
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("base-uri 'none'");
    expect(csp).not.toMatch(/script-src|unsafe-inline|unsafe-eval/);
    expect(csp).toMatch(/style-src 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(header(result, 'cache-control')).toBe('no-store');
    expect(header(result, 'referrer-policy')).toBe('no-referrer');
    expect(header(result, 'x-content-type-options')).toBe('nosniff');
    expect(header(result, 'x-frame-options')).toBe('DENY');
    expect(header(result, 'content-type')).toBe('text/html; charset=utf-8');
    expect(result.body).not.toContain('<script');
  });

  it("the page's one style element is exactly what the CSP hash allows", async () => {
    const { createHash } = await import('node:crypto');
    const { invoke } = setup();
    const result = await invoke(fixture('get-confirm-ja'));
    const style = /<style>([^<]*)<\/style>/.exec(result.body ?? '')![1]!;
    const hash = createHash('sha256').update(style).digest('base64');
    expect(header(result, 'content-security-policy')).toContain(`'sha256-${hash}'`);
  });
});

describe('POST: one click', () => {
  it('suppresses the address at once, source unsubscribe, the job in its reason; a mail provider gets a tiny 200', async () => {
    const { invoke, suppressions } = setup();
    const result = await invoke(fixture('post-one-click'));
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe(ONE_CLICK_DONE_TEXT);
    expect(header(result, 'content-type')).toBe('text/plain; charset=utf-8');
    expect(header(result, 'location')).toBeUndefined();
    const entry = suppressions.lists.get('acme')?.get(ADDRESS);
    expect(entry).toEqual({
      recipient: ADDRESS,
      kind: 'email',
      source: 'unsubscribe',
      reason: 'one-click unsubscribe from an email of job job-2025-06',
      addedAt: NOW,
    });
  });

  it('is idempotent: the same POST again is the same 200 and the same one entry', async () => {
    const { invoke, suppressions } = setup();
    await invoke(fixture('post-one-click'));
    const again = await invoke(fixture('post-one-click'));
    expect(again.statusCode).toBe(200);
    expect(suppressions.lists.get('acme')?.size).toBe(1);
  });

  it('reads the pair as multipart/form-data too (RFC 8058 §3.2)', async () => {
    const { invoke, suppressions } = setup();
    const result = await invoke(fixture('post-one-click-multipart'));
    expect(result.statusCode).toBe(200);
    expect(suppressions.lists.get('acme')?.has(ADDRESS)).toBe(true);
  });

  it('answers the confirm page\'s form (Accept: text/html) with the "done" page, in its language', async () => {
    const { invoke, suppressions } = setup();
    const result = await invoke(fixture('post-confirm-form-en'));
    expect(result.statusCode).toBe(200);
    expect(result.body).toMatch(/^<!doctype html><html lang="en">/);
    expect(result.body).toContain('You are unsubscribed');
    expect(result.body).toContain('配信を停止しました');
    expect(result.body).toContain('t***@example.com');
    expect(header(result, 'cache-control')).toBe('no-store');
    expect(suppressions.lists.get('acme')?.has(ADDRESS)).toBe(true);
  });

  it('takes a text body (not base64) and a key retired but still listed', async () => {
    const retiredKeys = { t1: KEYS.t1 };
    const oldToken = new UnsubscribeTokens(KEYS.t1, { kid: 't1', clock: () => NOW }).sign({
      clientId: 'acme',
      jobId: 'job-old',
      address: 'hanako@example.jp',
    });
    const { invoke, suppressions } = setup({ current: 't2', t2: KEYS.t2, ...retiredKeys });
    const event = withToken(fixture('post-one-click'), oldToken);
    const result = await invoke({ ...event, body: 'List-Unsubscribe=One-Click', isBase64Encoded: false });
    expect(result.statusCode).toBe(200);
    expect(suppressions.lists.get('acme')?.get('hanako@example.jp')?.reason).toContain('job-old');
  });

  it('logs the outcome, the client and the job, never the token or the address', async () => {
    const { invoke, logs } = setup();
    await invoke(fixture('post-one-click'));
    await invoke(withToken(fixture('post-one-click'), `${TOKEN.slice(0, -1)}A`));
    const text = logs.join('\n');
    expect(text).toContain('unsubscribed in one click');
    expect(text).toContain('job-2025-06');
    expect(text).not.toContain(TOKEN.split('.')[1]!);
    expect(text).not.toContain(ADDRESS);
    expect(text).not.toContain(KEYS.t2);
  });
});

describe('refusals change nothing', () => {
  const payload = TOKEN.split('.')[1]!;
  const tampered: readonly [string, string][] = [
    ['a MAC with one character changed', `${TOKEN.slice(0, -1)}${TOKEN.endsWith('A') ? 'B' : 'A'}`],
    [
      'another address in the payload, the MAC kept',
      `t2.${Buffer.from(JSON.stringify(['acme', 'job-2025-06', 'jiro@example.com', 1748854800])).toString('base64url')}.${TOKEN.split('.')[2]}`,
    ],
    ['another client in the payload', TOKEN.replace(payload, payload.replace('WyJhY21l', 'WyJhY21m'))],
    ['truncated', TOKEN.slice(0, 60)],
    ['its MAC cut off', TOKEN.slice(0, TOKEN.lastIndexOf('.'))],
    ['an unknown key id', TOKEN.replace(/^t2\./, 't9.')],
    [
      'forged with another secret',
      new UnsubscribeTokens('an-attacker-s-own-secret-of-32-bytes!!', { kid: 't2', clock: () => NOW }).sign({
        clientId: 'acme',
        jobId: 'job-2025-06',
        address: ADDRESS,
      }),
    ],
    ['empty', ''],
    ['not a token at all', 'hello'],
    ['huge', 'A'.repeat(MAX_TOKEN_CHARS + 1)],
    ['with a line break', `${TOKEN}\n`],
  ];

  for (const [what, token] of tampered) {
    it(`a token ${what}: POST 404 "not valid", GET 404; nothing suppressed`, async () => {
      const { invoke, suppressions } = setup();
      const before = suppressions.snapshot();
      for (const name of ['post-one-click', 'post-confirm-form-en', 'get-confirm-ja']) {
        const result = await invoke(withToken(fixture(name), token));
        expect(result.statusCode, name).toBe(404);
        expect(result.body).toContain('This link is not valid');
        expect(result.body).toContain('このリンクは無効です');
        expect(result.body).not.toContain('<form');
        expect(header(result, 'cache-control')).toBe('no-store');
      }
      expect(suppressions.snapshot()).toBe(before);
      expect(suppressions.writes).toBe(0);
    });
  }

  it('a body over the limit is a 413 before the token is looked at', async () => {
    const { invoke, suppressions } = setup();
    const big = `List-Unsubscribe=One-Click&pad=${'x'.repeat(MAX_ONE_CLICK_BODY_BYTES)}`;
    for (const event of [
      { ...fixture('post-one-click'), body: Buffer.from(big).toString('base64') },
      { ...fixture('post-one-click'), body: big, isBase64Encoded: false },
      { ...fixture('post-one-click'), body: 'A'.repeat(8 * 1024 * 1024) },
    ]) {
      const result = await invoke(event);
      expect(result.statusCode).toBe(413);
    }
    expect(suppressions.writes).toBe(0);
  });

  it('a POST without the one-click pair is a 400', async () => {
    const { invoke, suppressions } = setup();
    const event = fixture('post-one-click');
    for (const [contentType, body] of [
      ['application/x-www-form-urlencoded', ''],
      ['application/x-www-form-urlencoded', 'List-Unsubscribe=Yes'],
      ['application/json', '{"List-Unsubscribe":"One-Click"}'],
      ['text/plain', 'List-Unsubscribe=One-Click'],
    ] as const) {
      const result = await invoke({
        ...event,
        headers: { ...event.headers, 'content-type': contentType },
        body: Buffer.from(body).toString('base64'),
      });
      expect(result.statusCode, `${contentType} ${body}`).toBe(400);
    }
    expect(suppressions.writes).toBe(0);
  });

  it('any other method is a 405 naming GET and POST', async () => {
    const { invoke, suppressions } = setup();
    for (const method of ['PUT', 'DELETE', 'PATCH', 'HEAD']) {
      const result = await invoke(withMethod(fixture('post-one-click'), method));
      expect(result.statusCode).toBe(405);
      expect(header(result, 'allow')).toBe('GET, POST');
    }
    expect(suppressions.writes).toBe(0);
  });

  it('a key that cannot be read, or a list that cannot be written, is a 500 page with no detail', async () => {
    const suppressions = new MemorySuppressions();
    const clock = { now: () => NOW };
    const handlerWith = (deps: ConstructorParameters<typeof OneClickUnsubscribe>[0]) =>
      makeUnsubscribeHandler({
        unsubscribe: new OneClickUnsubscribe(deps),
        log: new PowertoolsLog('unsubscribe', { write: () => {} }),
      });
    const context = lambdaContext({ functionName: 'unsubscribe', timeoutMs: 10_000 });
    const unreadable = handlerWith({
      verifier: new UnsubscribeKeyring(async () => Promise.reject(new Error('AccessDeniedException: arn:…'))),
      suppressions,
      clock,
    });
    const result = (await unreadable(
      fixture('post-one-click'),
      context,
    )) as APIGatewayProxyStructuredResultV2;
    expect(result.statusCode).toBe(500);
    expect(result.body).not.toContain('AccessDenied');
    const failing = handlerWith({
      verifier: new UnsubscribeKeyring(async () => JSON.stringify(KEYS)),
      suppressions: { add: async () => Promise.reject(new Error('ProvisionedThroughputExceeded')) },
      clock,
    });
    const failed = (await failing(fixture('post-one-click'), context)) as APIGatewayProxyStructuredResultV2;
    expect(failed.statusCode).toBe(500);
    expect(failed.body).toContain('Something went wrong on our side');
  });
});

describe('the pieces', () => {
  it('masks an address to its first character and its domain', () => {
    expect(maskAddress('taro@example.com')).toBe('t***@example.com');
    expect(maskAddress('t@example.com')).toBe('t***@example.com');
    expect(maskAddress('first.last+tag@xn--r8jz45g.xn--zckzah')).toBe('f***@xn--r8jz45g.xn--zckzah');
    expect(maskAddress('')).toBe('***');
  });

  it('escapes what it shows', () => {
    const html = renderPage('done', 'en', '<b>@example.com');
    expect(html).toContain('&lt;***@example.com');
    expect(html).not.toContain('<b>');
  });

  it('reads Accept-Language by quality, ties to the earlier, absent or odd as English', () => {
    expect(preferredLanguage(undefined)).toBe('en');
    expect(preferredLanguage('')).toBe('en');
    expect(preferredLanguage('*')).toBe('en');
    expect(preferredLanguage('ja')).toBe('ja');
    expect(preferredLanguage('JA-jp')).toBe('ja');
    expect(preferredLanguage('en, ja')).toBe('en');
    expect(preferredLanguage('ja;q=0.5, en;q=0.5')).toBe('ja');
    expect(preferredLanguage('ja;q=abc, en;q=0.1')).toBe('en');
    expect(preferredLanguage(`${'xx;q=0.1,'.repeat(1000)}ja`)).toBe('en');
  });

  it("the fixtures' token is what the test keys sign for them", () => {
    const tokens = unsubscribeTokensFrom(JSON.stringify(KEYS), {
      clock: { now: () => Date.parse('2025-06-02T09:00:00Z') },
    });
    expect(tokens.sign({ clientId: 'acme', jobId: 'job-2025-06', address: ADDRESS })).toBe(TOKEN);
  });
});
