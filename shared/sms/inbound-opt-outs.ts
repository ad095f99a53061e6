/**
 * What a customer's text back (two-way SMS) changes in Switchboard: an opt-out keyword (STOP and the
 * others `readInboundSms` knows) puts the sender's number on the suppression list of every client
 * whose SMS settings send from the number it was texted to.
 *
 * Input: an SQS message body (the two-way payload with raw message delivery, or SNS's envelope
 * holding it); {@link makeRecordInboundSms} never throws for what it cannot use. Steps: read it
 * (`./inbound.ts`); for an opt-out, find the clients of the destination number
 * ({@link SmsNumberDirectory}); add one entry per client — kind `phone`, source `sms-stop`, the
 * keyword and the number in its reason. Output: what happened, for the handler's log.
 *
 * An `sms-stop` entry is the recipient's own request, as an email's one-click unsubscribe is: it is
 * written over whatever entry the number had, and automatic entries never replace it
 * (`shared/suppressions/model.ts`). A duplicate delivery writes the same entry again (its time the
 * later one). An opt-in (UNSTOP, START) and any other reply change nothing here: the service takes
 * the number off its own opt-out list on an opt-in, but whether that lifts the client's suppression
 * too is for the client to decide (an operator removes the entry).
 *
 * Pure: no AWS SDK. Adapters: `shared/adapters/dynamo-sms-numbers.ts` (the directory),
 * `shared/adapters/dynamo-suppressions.ts` (the list).
 */
import type { Clock } from '#shared/pacing/clock.ts';
import { entryReason, type SuppressionEntry } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import { type InboundSms, readInboundSms } from './inbound.ts';

/** Which clients send texts from an origination number (their `sms.originationIdentity`). */
export interface SmsNumberDirectory {
  /** The ids of the clients whose texts go out from `number` (E.164); none when no client's do. */
  clientsOf(number: string): Promise<readonly string[]>;
}

export type InboundSmsResult =
  | { readonly outcome: 'ignored'; readonly reason: string }
  /** An opt-out: the number is on these clients' lists now. */
  | { readonly outcome: 'suppressed'; readonly text: InboundSms; readonly clients: readonly string[] }
  /** An opt-out to a number no client sends from: nothing to suppress. */
  | { readonly outcome: 'no-client'; readonly text: InboundSms }
  /** An opt-in or a reply: nothing changes. */
  | { readonly outcome: 'opt-in' | 'reply'; readonly text: InboundSms };

export interface RecordInboundSmsDeps {
  readonly numbers: SmsNumberDirectory;
  readonly suppressions: SuppressionWriter;
  readonly clock: Clock;
}

/**
 * The use case of the sms-inbound function: one queue message in, what it changed out. Throws only
 * when a store does (to be retried: the write is idempotent).
 */
export function makeRecordInboundSms(deps: RecordInboundSmsDeps) {
  return async (body: unknown): Promise<InboundSmsResult> => {
    const text = readInboundSms(body);
    if ('ignored' in text) return { outcome: 'ignored', reason: text.ignored };
    if (text.intent !== 'opt-out') return { outcome: text.intent, text };
    const clients = await deps.numbers.clientsOf(text.to);
    if (clients.length === 0) return { outcome: 'no-client', text };
    const entry: SuppressionEntry = {
      recipient: text.from,
      kind: 'phone',
      source: 'sms-stop',
      reason: entryReason(`texted ${text.keyword} to ${text.to}`, 'sms-stop'),
      addedAt: deps.clock.now(),
    };
    for (const clientId of clients) await deps.suppressions.add(clientId, [entry]);
    return { outcome: 'suppressed', text, clients };
  };
}
