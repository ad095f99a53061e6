/**
 * The delivery of one queued batch of outcome events to its client's webhook: read the client's
 * target (URL and secret, at delivery time), sign the body, POST it. A 2xx is delivered; anything
 * else (a 4xx or 5xx, a refused or reset connection, no answer in time) is tried again after the
 * backoff of `backoff.ts` until the retry window ends (SQS then moves it to the dead-letter queue).
 * A client whose webhook was removed meanwhile drops what is queued for it.
 *
 * The body is built once per attempt from the queued events (the same bytes each time, since the
 * events are stored as queued); only the signature's timestamp changes between attempts.
 */
import { retryDelaySeconds } from './backoff.ts';
import type { OutcomeDeliveryBody } from './events.ts';
import type { OutcomeDelivery, OutcomeHttp, OutcomeTargets } from './ports.ts';
import { OUTCOME_SIGNATURE_HEADER, signOutcomeBody } from './signature.ts';

export type DeliveryResult =
  | { readonly kind: 'delivered'; readonly status: number }
  | { readonly kind: 'dropped'; readonly reason: string }
  | { readonly kind: 'retry'; readonly delaySeconds: number; readonly reason: string };

export interface OutcomeDelivererDeps {
  readonly targets: OutcomeTargets;
  readonly http: OutcomeHttp;
  readonly clock: { now(): number };
  /** Jitter source, in [0, 1) (tests pass a constant). */
  readonly random?: () => number;
  /** Multiplies every backoff delay (default 1; the local cloud's fault tests shorten them). */
  readonly delayScale?: number;
}

export class OutcomeDeliverer {
  readonly #deps: OutcomeDelivererDeps;

  constructor(deps: OutcomeDelivererDeps) {
    this.#deps = deps;
  }

  /** Delivers `delivery`, whose attempt this is (1 for the first). */
  async deliver(delivery: OutcomeDelivery, attempt: number): Promise<DeliveryResult> {
    const target = await this.#deps.targets.targetOf(delivery.clientId);
    if (!target) return { kind: 'dropped', reason: `client ${delivery.clientId} has no outcome webhook` };
    const body = outcomeBody(delivery);
    const headers = {
      'content-type': 'application/json',
      [OUTCOME_SIGNATURE_HEADER]: signOutcomeBody(target.secret, body, this.#deps.clock.now()),
      'user-agent': 'Switchboard-Outcomes/1',
    };
    const result = await this.#deps.http.post(target.url, body, headers);
    if ('status' in result && result.status >= 200 && result.status < 300) {
      return { kind: 'delivered', status: result.status };
    }
    const reason = 'status' in result ? `answered ${result.status}` : result.error;
    return { kind: 'retry', delaySeconds: this.#delay(attempt), reason };
  }

  #delay(attempt: number): number {
    const delay = retryDelaySeconds(Math.max(1, attempt), (this.#deps.random ?? Math.random)());
    return Math.max(1, Math.round(delay * (this.#deps.delayScale ?? 1)));
  }
}

/** The bytes POSTed for a delivery. */
export function outcomeBody(delivery: OutcomeDelivery): string {
  const body: OutcomeDeliveryBody = { events: delivery.events };
  return JSON.stringify(body);
}
