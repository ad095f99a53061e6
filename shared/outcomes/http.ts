/**
 * The HTTP side of a delivery: one POST with a timeout; a lost answer is an error, not a status.
 *
 * The URL's host was checked when the client set it (`settings.ts`: https, no inside address
 * written as such), but a public name can resolve to an inside address, and resolve differently
 * later (DNS rebinding). So the name is checked again where the connection is made: every address
 * it resolves to must be outside the ranges `settings.ts` refuses, else the POST is not sent (a
 * retryable error, as an unreachable receiver is). Redirects are not followed.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import { OutcomeError } from './errors.ts';
import type { OutcomeHttp, PostResult } from './ports.ts';
import { insideAddress } from './settings.ts';

/** How names are resolved: `dns.lookup`'s every address (tests give a resolver of their own). */
export type ResolveAll = (hostname: string) => Promise<readonly LookupAddress[]>;

export interface OutcomeHttpOptions {
  readonly timeoutMs: number;
  /** Loopback addresses allowed too (the local cloud's receivers; `OUTCOME_WEBHOOK_ALLOW_LOOPBACK_HTTP`). */
  readonly allowLoopback?: boolean;
  readonly resolve?: ResolveAll;
}

const systemResolve: ResolveAll = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
  );

/** A refused address's error: its `code` is what a delivery's reason reads. */
class InsideAddressError extends OutcomeError {
  readonly code: string = 'EINSIDEADDRESS';
}

function isLoopback(address: string): boolean {
  return /^127\./.test(address) || address === '::1' || /^::ffff:127\./.test(address);
}

/** `net`'s `lookup` option: resolves, refuses a name with any inside address among its addresses. */
function guardedLookup(resolveAll: ResolveAll, allowLoopback: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolveAll(hostname).then(
      (addresses) => {
        const refused = addresses.find(
          (a) => insideAddress(a.address) !== undefined && !(allowLoopback && isLoopback(a.address)),
        );
        if (addresses.length === 0) {
          callback(Object.assign(new Error(`${hostname} resolves to no address`), { code: 'ENOTFOUND' }), '');
        } else if (refused) {
          const why = `${hostname} resolves to ${refused.address}, ${insideAddress(refused.address)}: not POSTed`;
          callback(new InsideAddressError(why), '');
        } else if (options.all) callback(null, [...addresses]);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}

/** A POST through undici, given up after `timeoutMs`, only to public addresses. */
export function makeOutcomeHttp(options: OutcomeHttpOptions): OutcomeHttp {
  const agent = new Agent({
    connect: {
      lookup: guardedLookup(options.resolve ?? systemResolve, options.allowLoopback ?? false),
      // undici heeds the abort signal only once connected: connecting is bounded on its own.
      timeout: options.timeoutMs,
    },
  });
  return {
    async post(url, body, headers): Promise<PostResult> {
      try {
        const answer = await request(url, {
          method: 'POST',
          body,
          headers,
          dispatcher: agent,
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        await answer.body.dump().catch(() => undefined);
        return { status: answer.statusCode };
      } catch (error) {
        // A string code (undici's, the socket's, ours); the abort's DOMException has a number (23): its name.
        const e = error as { code?: unknown; name?: string; cause?: { code?: unknown } };
        const code = [e.code, e.cause?.code].find((c): c is string => typeof c === 'string');
        return { error: code ?? e.name ?? 'request failed' };
      }
    },
  };
}
