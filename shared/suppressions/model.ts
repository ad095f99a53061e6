/**
 * A client's suppression (do-not-call) list: the recipients none of its jobs may contact, whatever
 * the list uploaded says. An entry is a phone number (E.164, normalised with the call lists' rules
 * in the client's `defaultRegion`), a LINE user id or an email address (`shared/email/address.ts`),
 * with where it came from (`source`), why (`reason`) and when (`addedAt`).
 *
 * The list is checked where a contact starts, not only at upload: a call's start transaction holds
 * a ConditionCheck that the recipient's entry does not exist (`shared/adapters/dynamo-call-tasks.ts`,
 * argued in `docs/suppression-list.md`), and a message's claim reads the entries of the page it
 * claims (`shared/adapters/dynamo-message-claims.ts`). A suppressed task ends `cancelled` with
 * {@link suppressedReason}.
 */
import {
  normalizeEmailRecipient,
  normalizeLineUserId,
  normalizePhoneNumber,
} from '#shared/csv/recipients.ts';

/** Where an entry came from. */
export const SUPPRESSION_SOURCES = [
  'api',
  'csv',
  'line-unfollow',
  'call-outcome',
  'unsubscribe',
  'bounce',
  'complaint',
  'sms-stop',
] as const;
export type SuppressionSource = (typeof SUPPRESSION_SOURCES)[number];

/**
 * Sources that write entries on their own (an unfollow, a call's outcome, an email's permanent
 * bounce or complaint from SES's events, `shared/email/email-outcomes.ts`): such an entry never
 * replaces an operator's (`api`, `csv`), so that a later follow, which takes back its unfollow's
 * entry, cannot take an operator's with it. `unsubscribe` is not one of them: it is the recipient's
 * own request (an email's one-click link), recorded over whatever entry was there, so that an
 * operator who later removes their own entry cannot silently take the recipient's wish with it;
 * neither is `sms-stop`, the recipient's own STOP texted back (`shared/sms/inbound-opt-outs.ts`).
 */
export const AUTOMATIC_SOURCES: readonly SuppressionSource[] = [
  'line-unfollow',
  'call-outcome',
  'bounce',
  'complaint',
];

/**
 * How far an entry reaches: `channel`, only its own identifier (a phone number, a LINE user id, an
 * address: today's behaviour for every entry); `person`, also every other identifier linked to
 * that identifier's person (`shared/people/model.ts`), whatever the channel.
 */
export type SuppressionScope = 'channel' | 'person';

/**
 * Each source's scope unless the client sets another (`ClientSettings.suppressionScope`): a person's
 * own "no" (an operator's entry, an unsubscribe, a STOP, a spam complaint, a request on a call not
 * to be contacted) reaches the person; a bounce or an unfollow says an address or an account no
 * longer works, not that the person said no, and stays on its identifier.
 */
export const DEFAULT_SUPPRESSION_SCOPE: Readonly<Record<SuppressionSource, SuppressionScope>> = {
  api: 'person',
  csv: 'person',
  'line-unfollow': 'channel',
  'call-outcome': 'person',
  unsubscribe: 'person',
  bounce: 'channel',
  complaint: 'person',
  'sms-stop': 'person',
};

/** Whether an entry of `source` reaches its identifier's whole person, under the client's overrides. */
export function isPersonWide(
  source: SuppressionSource,
  overrides: Partial<Record<SuppressionSource, SuppressionScope>> | undefined,
): boolean {
  return (overrides?.[source] ?? DEFAULT_SUPPRESSION_SCOPE[source]) === 'person';
}

/** The reason a task ends with when another identifier of its person is suppressed person-wide. */
export function personSuppressedReason(source: string): string {
  return `${suppressedReason(source)} (another identifier of the same person)`;
}

/** What kind of recipient an entry names. */
export type SuppressionKind = 'phone' | 'line' | 'email';

export interface SuppressionEntry {
  /** E.164 for a phone number, the LINE user id as is, an email address normalised. */
  readonly recipient: string;
  readonly kind: SuppressionKind;
  readonly source: SuppressionSource;
  readonly reason: string;
  /** Epoch ms the entry was added. */
  readonly addedAt: number;
}

/** Longest reason kept on an entry, in characters. */
export const SUPPRESSION_REASON_MAX = 500;
/** Most recipients one API add, lookup or remove may name. */
export const SUPPRESSION_BATCH_MAX = 100;

/** The reason a task of a suppressed recipient ends `cancelled` with (the report and counts show it). */
export function suppressedReason(source: string): string {
  return `suppressed: ${source}`;
}

/** The source of a reason {@link suppressedReason} wrote for the recipient's own entry; undefined for any other. */
export function ownEntrySource(reason: string | undefined): string | undefined {
  if (!isSuppressedReason(reason) || reason!.endsWith(')')) return undefined;
  return reason!.slice('suppressed: '.length);
}

/** Is `reason` one {@link suppressedReason} wrote? */
export function isSuppressedReason(reason: string | undefined): boolean {
  return reason?.startsWith('suppressed: ') === true;
}

/** The default reason of an entry of each source, when none is given. */
export const DEFAULT_SUPPRESSION_REASON: Readonly<Record<SuppressionSource, string>> = {
  api: 'added by an operator',
  csv: 'uploaded in a suppression list',
  'line-unfollow': 'the recipient unfollowed the LINE channel',
  'call-outcome': 'the recipient asked not to be called again',
  unsubscribe: "the recipient used the email's one-click unsubscribe link",
  bounce: 'an email to the address bounced permanently',
  complaint: 'the recipient marked an email as spam',
  'sms-stop': 'the recipient texted STOP (or another opt-out keyword) to an SMS number of the client',
};

/** Where an entry lives in the control table: one partition per client, one item per recipient. */
export const suppressionKeys = {
  pk: (clientId: string) => `SUPPRESS#${clientId}`,
  entry: (clientId: string, recipient: string) => ({ pk: `SUPPRESS#${clientId}`, sk: recipient }),
};

/** A recipient as an operator writes it, read the way a list row is. */
export type SuppressionRecipient =
  | { readonly ok: true; readonly recipient: string; readonly kind: SuppressionKind }
  | { readonly ok: false; readonly reason: string };

/**
 * Reads a recipient as a list row would name it: an email address (it has an `@`), a LINE user id
 * (`U` + 32 hex digits), else a phone number of `region` normalised to E.164.
 */
export function readSuppressionRecipient(input: string, region: string): SuppressionRecipient {
  if (input.includes('@')) {
    const email = normalizeEmailRecipient(input);
    return email.ok
      ? { ok: true, recipient: email.recipient, kind: 'email' }
      : { ok: false, reason: `${JSON.stringify(input)} is not an email address (${email.reason})` };
  }
  const line = normalizeLineUserId(input);
  if (line.ok) return { ok: true, recipient: line.recipient, kind: 'line' };
  const phone = normalizePhoneNumber(input, region as Parameters<typeof normalizePhoneNumber>[1]);
  if (phone.ok) return { ok: true, recipient: phone.recipient, kind: 'phone' };
  return {
    ok: false,
    reason: `${JSON.stringify(input)} is neither a phone number (${phone.reason}) nor a LINE user id (U + 32 hex digits)`,
  };
}

/** The kind of a stored recipient (E.164 starts with `+`; a LINE user id has no `@`). */
export function kindOf(recipient: string): SuppressionKind {
  if (recipient.startsWith('+')) return 'phone';
  return recipient.includes('@') ? 'email' : 'line';
}

/** A reason as stored: trimmed, at most {@link SUPPRESSION_REASON_MAX} characters, or the source's default. */
export function entryReason(reason: string | undefined, source: SuppressionSource): string {
  const text = (reason ?? '').trim();
  if (text === '') return DEFAULT_SUPPRESSION_REASON[source];
  const chars = [...text];
  return chars.length <= SUPPRESSION_REASON_MAX ? text : chars.slice(0, SUPPRESSION_REASON_MAX).join('');
}

/**
 * The message claim's view of the list: those of `recipients` on it → the reason their task ends
 * with (`shared/adapters/dynamo-message-claims.ts` reads it for every page it claims).
 */
export function suppressionReasons(reader: {
  suppressed(clientId: string, recipients: readonly string[]): Promise<ReadonlyMap<string, SuppressionEntry>>;
}): (clientId: string, recipients: readonly string[]) => Promise<ReadonlyMap<string, string>> {
  return async (clientId, recipients) => {
    const found = await reader.suppressed(clientId, recipients);
    return new Map([...found].map(([recipient, entry]) => [recipient, suppressedReason(entry.source)]));
  };
}
