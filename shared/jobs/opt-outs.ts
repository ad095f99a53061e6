/**
 * Opt-out lookups for operators (`GET /clients/{clientId}/opt-outs`): whether given recipients
 * of a client are opted out now, or a page of the client's opted-out recipients.
 *
 * Opt-outs belong to the client, not to one of its channels: a LINE unfollow on any channel of the
 * client is recorded under `OPTOUT#{clientId}` (`shared/webhooks/process.ts` records it with the
 * channel's `clientId`), keyed by recipient, and every later job of the client skips that
 * recipient. So a client reads its own list and no other: the client id in the path is the
 * partition read, and IAM (or the console's tenancy check) has already decided who may name it.
 *
 * Input: the route's query. `recipient` (one or more, comma-separated: API Gateway joins repeated
 * parameters so) looks those up, each written as a list row would be (a phone number in the
 * client's region, or a LINE user id); without it, `limit` and `next` page through the list.
 * Output: {@link OptOutsAnswer}; a bad query is a {@link ValidationError} naming the parameter.
 */
import { normalizeLineUserId, normalizePhoneNumber } from '#shared/csv/recipients.ts';
import { emptyFieldErrors, ValidationError } from './errors.ts';
import type { ClientSettings } from './model.ts';
import type { OptOutReader, OptOutRecord } from './ports.ts';

/** Most recipients one lookup may name. */
export const OPT_OUT_LOOKUP_MAX = 100;
/** Page size of the list when `limit` is not given, and its largest. */
export const OPT_OUT_PAGE_DEFAULT = 50;
export const OPT_OUT_PAGE_MAX = 500;

/** One recipient as the API shows it. */
export interface OptOutView {
  /** The recipient as stored: E.164 for a phone number, the LINE user id as is. */
  readonly recipient: string;
  /** What the operator typed, when it differs from `recipient`. */
  readonly input?: string;
  readonly optedOut: boolean;
  /** When the unfollow (or the follow that opted back in) happened; absent when none is recorded. */
  readonly since?: string;
}

export interface OptOutsAnswer {
  readonly optOuts: readonly OptOutView[];
  /** The list's next page (hand it back as `next`); absent on the last page and for a lookup. */
  readonly next?: string;
}

export type OptOutQuery =
  | {
      readonly kind: 'lookup';
      readonly recipients: readonly { readonly input: string; readonly recipient: string }[];
    }
  | { readonly kind: 'list'; readonly limit: number; readonly next?: string };

/** Reads the route's query; throws {@link ValidationError} naming each bad parameter. */
export function parseOptOutQuery(
  query: Readonly<Record<string, string | undefined>>,
  client: Pick<ClientSettings, 'defaultRegion'>,
): OptOutQuery {
  const errors = emptyFieldErrors();
  const known = new Set(['recipient', 'limit', 'next']);
  for (const key of Object.keys(query)) if (!known.has(key)) errors[key] = ['is not a known parameter'];
  const raw = query.recipient;
  if (raw !== undefined) {
    const inputs = raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const recipients: { input: string; recipient: string }[] = [];
    const bad: string[] = [];
    for (const input of inputs) {
      const recipient = normalizeRecipient(input, client.defaultRegion);
      if (recipient === undefined) bad.push(input);
      else recipients.push({ input, recipient });
    }
    if (inputs.length === 0) errors.recipient = ['must name a phone number or a LINE user id'];
    else if (inputs.length > OPT_OUT_LOOKUP_MAX)
      errors.recipient = [`may name at most ${OPT_OUT_LOOKUP_MAX} recipients at once`];
    else if (bad.length > 0)
      errors.recipient = bad.map(
        (input) =>
          `${JSON.stringify(input)} is neither a phone number nor a LINE user id (U + 32 hex digits)`,
      );
    if (query.limit !== undefined || query.next !== undefined)
      errors[query.limit !== undefined ? 'limit' : 'next'] = ['pages the list: not with recipient'];
    if (Object.keys(errors).length > 0) throw new ValidationError('invalid opt-out query', errors);
    return { kind: 'lookup', recipients };
  }
  const limit = query.limit === undefined ? OPT_OUT_PAGE_DEFAULT : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > OPT_OUT_PAGE_MAX)
    errors.limit = [`must be a whole number from 1 to ${OPT_OUT_PAGE_MAX}`];
  if (query.next === '') errors.next = ['is not a token this API returned'];
  if (Object.keys(errors).length > 0) throw new ValidationError('invalid opt-out query', errors);
  return { kind: 'list', limit, ...(query.next === undefined ? {} : { next: query.next }) };
}

/** A recipient as a list row would name it: a LINE user id, else a phone number of `region`. */
function normalizeRecipient(input: string, region: string): string | undefined {
  const line = normalizeLineUserId(input);
  if (line.ok) return line.recipient;
  const phone = normalizePhoneNumber(input, region as Parameters<typeof normalizePhoneNumber>[1]);
  return phone.ok ? phone.recipient : undefined;
}

function view(record: OptOutRecord, input?: string): OptOutView {
  return {
    recipient: record.recipient,
    ...(input !== undefined && input !== record.recipient ? { input } : {}),
    optedOut: record.optedOut,
    since: new Date(record.eventAt).toISOString(),
  };
}

/** Answers an opt-out query of `client` from `reader` (see the module's comment). */
export async function findOptOuts(
  reader: OptOutReader,
  client: Pick<ClientSettings, 'clientId' | 'defaultRegion'>,
  rawQuery: Readonly<Record<string, string | undefined>>,
): Promise<OptOutsAnswer> {
  const query = parseOptOutQuery(rawQuery, client);
  if (query.kind === 'list') {
    const page = await reader.page(client.clientId, {
      limit: query.limit,
      ...(query.next === undefined ? {} : { next: query.next }),
    });
    return { optOuts: page.records.map((r) => view(r)), ...(page.next ? { next: page.next } : {}) };
  }
  const records = await reader.records(
    client.clientId,
    query.recipients.map((r) => r.recipient),
  );
  const byRecipient = new Map(records.map((r) => [r.recipient, r]));
  return {
    optOuts: query.recipients.map(({ input, recipient }) => {
      const record = byRecipient.get(recipient);
      if (record) return view(record, input);
      return { recipient, ...(input !== recipient ? { input } : {}), optedOut: false };
    }),
  };
}
