/**
 * A client's outcome webhook setting: `outcomeWebhook: { url, secret }` in `PUT /clients/{id}`.
 * The URL is stored in the client's settings; the secret is written to the secret store (the
 * channels table, under its KMS key) and never stored with the settings, so neither the API, the
 * CLI nor the console can return it. A later PUT may leave the secret out to keep the one set.
 *
 * The URL must be https; plain http is allowed only to a loopback host, and only where the
 * deployment says so (the local cloud sets `OUTCOME_WEBHOOK_ALLOW_LOOPBACK_HTTP=true`; AWS never).
 */
import { BlockList, isIP } from 'node:net';
import { emptyFieldErrors, type FieldErrors } from '#shared/jobs/errors.ts';

/** What the client's settings keep: the URL and when its secret was last set (never the secret). */
export interface OutcomeWebhookSettings {
  readonly url: string;
  readonly secretSetAt: number;
}

export interface OutcomeWebhookPolicy {
  /** Whether `http://127.0.0.1`/`localhost` URLs are accepted (the local cloud only). */
  readonly allowLoopbackHttp: boolean;
}

export const OUTCOME_SECRET_MIN_LENGTH = 16;
const OUTCOME_SECRET_MAX_LENGTH = 512;
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Address ranges no customer's endpoint is on: the function's own host, the cloud's metadata and
 * the VPC (a webhook to them is a request forgery, SSRF). Checked on the URL's host as written:
 * an IP literal in any of its forms (`new URL` turns `2852039166` and `0xa9fea9fe` into dotted
 * form) and the `localhost` names. A public name that resolves to such an address is refused where
 * the delivery connects (`http.ts`), on every address it resolves to then.
 */
const INSIDE = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['240.0.0.0', 4],
] as const) {
  INSIDE.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  // ::/96 holds ::, ::1 and the old IPv4-compatible ::a.b.c.d; the others embed an IPv4 address
  // (SIIT, NAT64, 6to4) or are local (unique local, link-local, the old site-local). A mapped
  // ::ffff:a.b.c.d is checked as its IPv4 address (`insideAddress`): as a subnet here, BlockList
  // would match every IPv4 address against it.
  ['::', 96],
  ['::ffff:0:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['2002::', 16],
  ['100::', 64],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
] as const) {
  INSIDE.addSubnet(net, bits, 'ipv6');
}

/**
 * What kind of inside address `hostname` (as `URL` gives it, or an address a name resolved to) is,
 * if it is one.
 */
export function insideAddress(hostname: string): string | undefined {
  // `localhost.` is `localhost`: a trailing dot only says the name is fully qualified.
  const host = hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return 'a loopback name';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host)?.[1] ?? mappedHex(host);
  if (mapped) return insideAddress(mapped);
  const family = isIP(host);
  if (family === 0) return undefined;
  return INSIDE.check(host, family === 4 ? 'ipv4' : 'ipv6')
    ? 'a private, loopback or link-local address'
    : undefined;
}

/** `::ffff:a9fe:a9fe` (how `URL` writes an IPv4-mapped IPv6 address) as the IPv4 address it maps. */
function mappedHex(host: string): string | undefined {
  const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (!m) return undefined;
  const hi = Number.parseInt(m[1]!, 16);
  const lo = Number.parseInt(m[2]!, 16);
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

export type OutcomeWebhookInput =
  | { readonly ok: true; readonly settings: OutcomeWebhookSettings | undefined; readonly newSecret?: string }
  | { readonly ok: false; readonly fieldErrors: FieldErrors };

function urlErrors(raw: unknown, policy: OutcomeWebhookPolicy): string[] {
  if (typeof raw !== 'string' || raw === '') return ['required: the https URL events are POSTed to'];
  if (raw.length > 2048) return ['must be at most 2048 characters'];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return ['must be an absolute URL'];
  }
  if (url.username || url.password) return ['must not carry a user name or password'];
  const loopbackHere = policy.allowLoopbackHttp && LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackHere)) {
    return [
      policy.allowLoopbackHttp
        ? 'must be https (or http to 127.0.0.1/localhost on the local cloud)'
        : 'must be https',
    ];
  }
  const inside = insideAddress(url.hostname);
  if (inside && !loopbackHere) return [`must be a public address, not ${inside} (${url.hostname})`];
  return [];
}

function secretErrors(raw: unknown, hasStored: boolean): string[] {
  if (raw === undefined) return hasStored ? [] : ['required: no secret is set for this client yet'];
  if (typeof raw !== 'string') return ['must be a string'];
  if (raw.length < OUTCOME_SECRET_MIN_LENGTH || raw.length > OUTCOME_SECRET_MAX_LENGTH || /\s/.test(raw)) {
    return [`must be ${OUTCOME_SECRET_MIN_LENGTH} to ${OUTCOME_SECRET_MAX_LENGTH} characters, no spaces`];
  }
  return [];
}

/**
 * Reads `outcomeWebhook` from a client's settings request. `existing` is what the client has now
 * (its secret may be kept); absent input removes the webhook.
 */
export function parseOutcomeWebhook(
  input: unknown,
  existing: OutcomeWebhookSettings | undefined,
  policy: OutcomeWebhookPolicy,
  now: number,
): OutcomeWebhookInput {
  if (input === undefined || input === null) return { ok: true, settings: undefined };
  const errors = emptyFieldErrors();
  if (typeof input !== 'object' || Array.isArray(input)) {
    errors.outcomeWebhook = ['must be an object {url, secret}'];
    return { ok: false, fieldErrors: errors };
  }
  const { url, secret, ...rest } = input as Record<string, unknown>;
  for (const key of Object.keys(rest)) {
    if (key !== 'secretSetAt') errors[`outcomeWebhook.${key}`] = ['unknown field'];
  }
  const forUrl = urlErrors(url, policy);
  if (forUrl.length) errors['outcomeWebhook.url'] = forUrl;
  const forSecret = secretErrors(secret, existing !== undefined);
  if (forSecret.length) errors['outcomeWebhook.secret'] = forSecret;
  if (Object.keys(errors).length > 0) return { ok: false, fieldErrors: errors };
  const newSecret = typeof secret === 'string' ? secret : undefined;
  return {
    ok: true,
    settings: { url: url as string, secretSetAt: newSecret ? now : existing!.secretSetAt },
    ...(newSecret ? { newSecret } : {}),
  };
}
