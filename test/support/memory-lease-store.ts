/**
 * An in-memory {@link LeaseStore}: the reference semantics the DynamoDB adapter mirrors, each
 * method being one atomic compare-and-set, and a stand-in for broker tests.
 */
import {
  canTake,
  type Lease,
  type LeaseStore,
  passesFence,
  type RenewRequest,
  release,
  renew,
  type TakeRequest,
  take,
} from '#shared/lease/lease.ts';

export class MemoryLeaseStore implements LeaseStore {
  readonly #leases = new Map<string, Lease>();

  /** The stored record, as a consistent read would see it. */
  get(clientId: string): Lease | undefined {
    return this.#leases.get(clientId);
  }

  async tryTake(request: TakeRequest): Promise<Lease | undefined> {
    const current = this.#leases.get(request.clientId);
    if (!canTake(current, request.owner, request.now)) return undefined;
    const next = take(current, request);
    this.#leases.set(request.clientId, next);
    return next;
  }

  async tryRenew(request: RenewRequest): Promise<Lease | undefined> {
    const current = this.#leases.get(request.clientId);
    if (!passesFence(current, request.owner, request.token, request.now)) return undefined;
    const next = renew(current, request);
    this.#leases.set(request.clientId, next);
    return next;
  }

  async release(request: { clientId: string; owner: string; token: number }): Promise<boolean> {
    const current = this.#leases.get(request.clientId);
    const next = release(current, request.owner, request.token);
    if (!next || next === current) return false;
    this.#leases.set(request.clientId, next);
    return true;
  }

  /** The fence every work-starting write checks (LEASE_CONDITIONS.fence). */
  fence(clientId: string, owner: string, token: number | undefined, now: number): boolean {
    return token !== undefined && passesFence(this.#leases.get(clientId), owner, token, now);
  }
}
