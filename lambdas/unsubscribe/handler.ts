/**
 * The unsubscribe link (`GET|POST /unsubscribe/{token}`, API Gateway HTTP API → Lambda, public):
 * read the request, call the one-click use case, answer a page.
 *
 * - GET: the confirm page (the masked address and a button), changing nothing: mail scanners and
 *   link previews follow links.
 * - POST with RFC 8058's body (`List-Unsubscribe=One-Click`, form-urlencoded or multipart; what
 *   Gmail and Yahoo send, and what the confirm page's form sends): the address is suppressed, and
 *   the answer is a 200 — the "done" page for a browser (`Accept: text/html`), a one-line text for
 *   a mail provider's server. Never a redirect (RFC 8058 §3.2). Again is fine: the same 200.
 * - A token that does not verify: 404 "not valid"; a POST with another body: 400; a body over
 *   {@link MAX_ONE_CLICK_BODY_BYTES}: 413; any other method: 405. None of them changes anything.
 *
 * Logs name the outcome, the client and the job, never the token or the address.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { OneClickUnsubscribe } from '#shared/email/one-click-unsubscribe.ts';
import { isOneClickUnsubscribeBody, MAX_ONE_CLICK_BODY_BYTES } from '#shared/email/unsubscribe.ts';
import { decodeRequestBody, getHeader } from '#shared/http/api-gateway.ts';
import type { Logger } from '#shared/log.ts';
import { type PageKind, type PageLanguage, pageHeaders, preferredLanguage, renderPage } from './page.ts';

/** What a mail provider's server is answered (a browser gets the "done" page). */
export const ONE_CLICK_DONE_TEXT = 'Unsubscribed.\n';

const STATUS: Readonly<Record<PageKind, number>> = {
  confirm: 200,
  done: 200,
  invalid: 404,
  'not-one-click': 400,
  'too-large': 413,
  method: 405,
  error: 500,
};

function page(kind: PageKind, language: PageLanguage, address?: string): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: STATUS[kind],
    headers: { ...pageHeaders(language), ...(kind === 'method' ? { allow: 'GET, POST' } : {}) },
    body: renderPage(kind, language, address),
  };
}

/** A body over the limit, judged before decoding (a base64 body is 4/3 of its bytes). */
function bodyTooLarge(event: APIGatewayProxyEventV2): boolean {
  const length = event.body?.length ?? 0;
  const bytes = event.isBase64Encoded ? Math.floor((length * 3) / 4) : Buffer.byteLength(event.body ?? '');
  return bytes > MAX_ONE_CLICK_BODY_BYTES + (event.isBase64Encoded ? 2 : 0);
}

export interface UnsubscribeHandlerDeps {
  readonly unsubscribe: Pick<OneClickUnsubscribe, 'look' | 'unsubscribe'>;
  readonly log: Logger;
}

export function makeUnsubscribeHandler(deps: UnsubscribeHandlerDeps) {
  const { log } = deps;
  const answer = async (event: APIGatewayProxyEventV2, language: PageLanguage) => {
    const method = event.requestContext.http.method.toUpperCase();
    const token = event.pathParameters?.token ?? '';
    if (method === 'GET') {
      const link = await deps.unsubscribe.look(token);
      if (!link.valid) {
        log.info('unsubscribe link refused', { method, reason: link.reason });
        return page('invalid', language);
      }
      return page('confirm', language, link.address);
    }
    if (method !== 'POST') return page('method', language);
    if (bodyTooLarge(event)) return page('too-large', language);
    const body = decodeRequestBody(event);
    if (body.length > MAX_ONE_CLICK_BODY_BYTES) return page('too-large', language);
    if (!isOneClickUnsubscribeBody(getHeader(event.headers, 'content-type'), body)) {
      log.info('unsubscribe POST without the one-click body');
      return page('not-one-click', language);
    }
    const done = await deps.unsubscribe.unsubscribe(token);
    if (!done.valid) {
      log.info('unsubscribe link refused', { method, reason: done.reason });
      return page('invalid', language);
    }
    log.info('unsubscribed in one click', { clientId: done.clientId, jobId: done.jobId });
    log.metrics({ Unsubscribes: 1 });
    if ((getHeader(event.headers, 'accept') ?? '').toLowerCase().includes('text/html'))
      return page('done', language, done.address);
    return {
      statusCode: 200,
      headers: { ...pageHeaders(language), 'content-type': 'text/plain; charset=utf-8' },
      body: ONE_CLICK_DONE_TEXT,
    };
  };
  return middy(async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const language = preferredLanguage(getHeader(event.headers, 'accept-language'));
    try {
      return await answer(event, language);
    } catch (error) {
      // The key could not be read or the list not written: nothing to show but "try again".
      log.error('unsubscribe failed', { method: event.requestContext.http.method, error });
      return page('error', language);
    }
  });
}
