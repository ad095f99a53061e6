/**
 * The End User Messaging SMS account of one region as `SendTextMessage` sees it: its origination
 * identities (phone numbers, sender IDs, pools), each with a throughput in message parts per second
 * and an opt-out list; the opt-out lists; and the monthly spend limit for text messages.
 *
 * - Throughput: "SMS throughput limits … are measured in Message Parts per Second (MPS)", per
 *   origination identity (https://docs.aws.amazon.com/sms-voice/latest/userguide/sms-limitations-mps.html:
 *   a US toll-free number 3 MPS, a US short code 100, a long code elsewhere 10). Each identity has a
 *   token bucket of parts that holds one second's worth and refills continuously; a message of more
 *   parts than the bucket holds goes through when it is full and leaves it in debt, so the rate holds
 *   on average. `DryRun` sends have their own bucket of at most 5 MPS (the API reference's
 *   `SendTextMessage` `DryRun`: "The Message Parts per Second (MPS) limit when using DryRun is five.
 *   If your origination identity has a lower MPS limit then the lower MPS limit is used.").
 * - Opt-out lists: an identity uses one list ("Default" unless told otherwise); a number on it is
 *   refused to that identity. An end user's STOP adds the number with `EndUserOptedOut` true.
 * - Spend: each accepted part costs `pricePerPart` US dollars against `monthlySpendLimit`, which
 *   resets at the start of each calendar month (UTC).
 *
 * Time is the injected clock's, so tests move it instead of sleeping.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '#shared/pacing/clock.ts';

/** An origination identity the account owns. */
export type OriginationIdentitySettings =
  | {
      readonly kind: 'phone-number';
      /** E.164. */
      readonly phoneNumber: string;
      readonly mps?: number;
      readonly optOutList?: string;
    }
  | {
      readonly kind: 'sender-id';
      readonly senderId: string;
      readonly isoCountryCode: string;
      readonly mps?: number;
      readonly optOutList?: string;
    }
  | {
      readonly kind: 'pool';
      readonly poolId: string;
      readonly mps?: number;
      readonly optOutList?: string;
    };

/** An origination identity as the stand-in keeps it: every name that designates it. */
export interface OriginationIdentity {
  readonly kind: OriginationIdentitySettings['kind'];
  /** PhoneNumberId, SenderId or PoolId. */
  readonly id: string;
  readonly arn: string;
  /** What recipients see: the phone number or the sender ID (a pool: its id). */
  readonly origin: string;
  readonly mps: number;
  readonly optOutList: string;
}

export interface OptedOutNumber {
  readonly number: string;
  readonly at: number;
  readonly endUser: boolean;
}

export interface SpendSettings {
  /** US dollars a calendar month for text messages (`MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT` past it). */
  readonly monthlySpendLimit: number;
  /** US dollars per message part accepted. */
  readonly pricePerPart: number;
}

export const DEFAULT_OPT_OUT_LIST = 'Default';
/** A long code's MPS in most countries (the MPS page): the default for an identity that names none. */
const DEFAULT_MPS = 10;
const DRY_RUN_MPS = 5;

/** A token bucket of message parts: `rate` a second, holding one second's worth. */
class PartsBucket {
  readonly #clock: Clock;
  readonly #rate: number;
  #tokens: number;
  #filledAt: number;

  constructor(clock: Clock, rate: number) {
    this.#clock = clock;
    this.#rate = rate;
    this.#tokens = rate;
    this.#filledAt = clock.now();
  }

  /** Takes `parts`; false (and nothing taken) when they do not fit yet. */
  take(parts: number): boolean {
    const now = this.#clock.now();
    this.#tokens = Math.min(
      this.#rate,
      this.#tokens + (Math.max(0, now - this.#filledAt) / 1000) * this.#rate,
    );
    this.#filledAt = now;
    if (this.#tokens < parts && this.#tokens < this.#rate) return false;
    this.#tokens -= parts;
    return true;
  }
}

export class SmsAccount {
  readonly #clock: Clock;
  readonly #region: string;
  readonly #accountId: string;
  readonly #identities: OriginationIdentity[] = [];
  readonly #byName = new Map<string, OriginationIdentity>();
  readonly #buckets = new Map<string, { send: PartsBucket; dryRun: PartsBucket }>();
  readonly #optOutLists = new Map<string, Map<string, OptedOutNumber>>();
  #spend: SpendSettings;
  #spent = { month: '', usd: 0 };

  constructor(
    parts: { clock: Clock; region: string; accountId: string },
    identities: readonly OriginationIdentitySettings[],
    optOutLists: Readonly<Record<string, readonly string[]>>,
    spend: SpendSettings,
  ) {
    this.#clock = parts.clock;
    this.#region = parts.region;
    this.#accountId = parts.accountId;
    this.#spend = spend;
    for (const [name, numbers] of Object.entries(optOutLists)) {
      const list = this.#list(name);
      for (const number of numbers) list.set(number, { number, at: this.#clock.now(), endUser: true });
    }
    for (const settings of identities) this.addIdentity(settings);
  }

  /** Adds an origination identity (and its opt-out list, if new). */
  addIdentity(settings: OriginationIdentitySettings): OriginationIdentity {
    const identity = this.#identity(settings);
    this.#identities.push(identity);
    this.#list(identity.optOutList);
    for (const name of this.#namesOf(settings, identity)) this.#byName.set(name, identity);
    this.#buckets.set(identity.id, {
      send: new PartsBucket(this.#clock, identity.mps),
      dryRun: new PartsBucket(this.#clock, Math.min(DRY_RUN_MPS, identity.mps)),
    });
    return identity;
  }

  /** The identity `name` designates (its number, id, sender ID or ARN), if any. */
  identity(name: string): OriginationIdentity | undefined {
    return this.#byName.get(name);
  }

  /** The identity the service picks when a send names none: the account's first, if any. */
  anyIdentity(): OriginationIdentity | undefined {
    return this.#identities[0];
  }

  /** Takes `parts` from the identity's bucket; false when its MPS is spent for now. */
  takeParts(identity: OriginationIdentity, parts: number, dryRun: boolean): boolean {
    const buckets = this.#buckets.get(identity.id)!;
    return (dryRun ? buckets.dryRun : buckets.send).take(parts);
  }

  // ---- opt-out lists -------------------------------------------------------------------------

  /** The name of the list `nameOrArn` designates, if it exists. */
  optOutListName(nameOrArn: string): string | undefined {
    const name = nameOrArn.startsWith('arn:') ? nameOrArn.slice(nameOrArn.lastIndexOf('/') + 1) : nameOrArn;
    return this.#optOutLists.has(name) && (name === nameOrArn || nameOrArn === this.optOutListArn(name))
      ? name
      : undefined;
  }

  optOutListArn(name: string): string {
    return this.#arn(`opt-out-list/${name}`);
  }

  isOptedOut(identity: OriginationIdentity, number: string): boolean {
    return this.#list(identity.optOutList).has(number);
  }

  optedOut(list: string): readonly OptedOutNumber[] {
    return [...this.#list(list).values()];
  }

  /** Puts `number` on `list`: by the account (`PutOptedOutNumber`) or by the end user (a STOP). */
  optOut(list: string, number: string, endUser: boolean): OptedOutNumber {
    const entry = { number, at: this.#clock.now(), endUser };
    this.#list(list).set(number, entry);
    return entry;
  }

  /** Takes `number` off `list`; the entry removed, or undefined when it was not there. */
  optIn(list: string, number: string): OptedOutNumber | undefined {
    const entries = this.#list(list);
    const entry = entries.get(number);
    entries.delete(number);
    return entry;
  }

  // ---- spend ---------------------------------------------------------------------------------

  get spend(): SpendSettings {
    return this.#spend;
  }

  /** Changes the limit or the price at run time (a limit raised, say). */
  setSpend(change: Partial<SpendSettings>): void {
    this.#spend = { ...this.#spend, ...change };
  }

  /** US dollars spent on text messages this calendar month. */
  spentThisMonth(): number {
    const month = new Date(this.#clock.now()).toISOString().slice(0, 7);
    if (this.#spent.month !== month) this.#spent = { month, usd: 0 };
    return this.#spent.usd;
  }

  /** Whether `usd` more fits under the monthly limit. */
  spendAllows(usd: number): boolean {
    return this.spentThisMonth() + usd <= this.#spend.monthlySpendLimit + 1e-9;
  }

  recordSpend(usd: number): void {
    this.spentThisMonth();
    this.#spent.usd += usd;
  }

  // ---- names ---------------------------------------------------------------------------------

  #identity(settings: OriginationIdentitySettings): OriginationIdentity {
    const mps = settings.mps ?? DEFAULT_MPS;
    const optOutList = settings.optOutList ?? DEFAULT_OPT_OUT_LIST;
    switch (settings.kind) {
      case 'phone-number': {
        const id = `phone-${digest(settings.phoneNumber)}`;
        return {
          kind: 'phone-number',
          id,
          arn: this.#arn(`phone-number/${id}`),
          origin: settings.phoneNumber,
          mps,
          optOutList,
        };
      }
      case 'sender-id': {
        const arn = this.#arn(`sender-id/${settings.senderId}/${settings.isoCountryCode}`);
        return { kind: 'sender-id', id: settings.senderId, arn, origin: settings.senderId, mps, optOutList };
      }
      case 'pool':
        return {
          kind: 'pool',
          id: settings.poolId,
          arn: this.#arn(`pool/${settings.poolId}`),
          origin: settings.poolId,
          mps,
          optOutList,
        };
    }
  }

  #namesOf(settings: OriginationIdentitySettings, identity: OriginationIdentity): string[] {
    const names = [identity.id, identity.arn];
    if (settings.kind === 'phone-number') names.push(settings.phoneNumber);
    return names;
  }

  #arn(resource: string): string {
    return `arn:aws:sms-voice:${this.#region}:${this.#accountId}:${resource}`;
  }

  #list(name: string): Map<string, OptedOutNumber> {
    let list = this.#optOutLists.get(name);
    if (!list) {
      list = new Map();
      this.#optOutLists.set(name, list);
    }
    return list;
  }
}

/** A stable 32-hex id for a resource, as the service's `phone-…` ids look. */
function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 32);
}
