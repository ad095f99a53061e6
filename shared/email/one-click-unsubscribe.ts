/**
 * The use case behind an email's unsubscribe link (`/unsubscribe/{token}`, RFC 8058).
 *
 * Input: the token of the link (and nothing else: a one-click POST carries no cookie and no
 * credential, so the token is the authority). Output: whom the link names, or why it is refused.
 * Main course:
 * 1. The token is verified (`shared/email/unsubscribe.ts`: HMAC under the current or a retired key).
 *    A forged, altered, truncated or unknown-key token is refused, and nothing is read or written.
 * 2. {@link OneClickUnsubscribe.look} stops there: the confirm page shows the link, and a mail
 *    scanner that follows it changes nothing.
 * 3. {@link OneClickUnsubscribe.unsubscribe} puts the address on the client's suppression list at
 *    once, source `unsubscribe`, the job in its reason. Doing it again rewrites the same entry.
 */

import { entryReason } from '#shared/suppressions/model.ts';
import type { SuppressionWriter } from '#shared/suppressions/ports.ts';
import type { UnsubscribeRefusal, UnsubscribeVerdict } from './unsubscribe.ts';

/** What verifies a link's token (`shared/adapters/unsubscribe-secret.ts`'s `UnsubscribeKeyring`). */
export interface UnsubscribeVerifier {
  verify(token: string): Promise<UnsubscribeVerdict>;
}

/** Whom a link names, or why it names nobody. */
export type UnsubscribeLink =
  | {
      readonly valid: true;
      readonly clientId: string;
      readonly jobId: string;
      /** The recipient's normalised address. */
      readonly address: string;
    }
  | { readonly valid: false; readonly reason: UnsubscribeRefusal };

export interface OneClickUnsubscribeDeps {
  readonly verifier: UnsubscribeVerifier;
  readonly suppressions: SuppressionWriter;
  readonly clock: { now(): number };
}

/** The reason an unsubscribe's entry carries: the job whose email held the link. */
export function unsubscribeReason(jobId: string): string {
  return entryReason(`one-click unsubscribe from an email of job ${jobId}`, 'unsubscribe');
}

export class OneClickUnsubscribe {
  readonly #deps: OneClickUnsubscribeDeps;

  constructor(deps: OneClickUnsubscribeDeps) {
    this.#deps = deps;
  }

  /** Whom the link names; changes nothing. */
  async look(token: string): Promise<UnsubscribeLink> {
    const verdict = await this.#deps.verifier.verify(token);
    if (!verdict.ok) return { valid: false, reason: verdict.reason };
    const { clientId, jobId, address } = verdict.unsubscribe;
    return { valid: true, clientId, jobId, address };
  }

  /** Suppresses the address the link names (idempotent); a refused link changes nothing. */
  async unsubscribe(token: string): Promise<UnsubscribeLink> {
    const link = await this.look(token);
    if (!link.valid) return link;
    await this.#deps.suppressions.add(link.clientId, [
      {
        recipient: link.address,
        kind: 'email',
        source: 'unsubscribe',
        reason: unsubscribeReason(link.jobId),
        addedAt: this.#deps.clock.now(),
      },
    ]);
    return link;
  }
}
