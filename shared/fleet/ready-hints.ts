/**
 * What the job manager remembers of a client between runs, so a run reads the outstanding tasks
 * only of the clients where something changed: its *ready hint* (one control-table item per
 * client, `pk=FLEETHINT#{clientId}, sk=HINT`, written by the job manager only).
 *
 * A hint records what the client's outstanding tasks said when they were last read (the earliest
 * `readyAt` of a task of its open jobs, or "none before `quietUntil`") together with *marks* of
 * everything whose change can make that answer wrong:
 * - the jobs mark: each open job's id, status, `updatedAt` and `counts.tasks` — an ingest step
 *   (new tasks), a resume, a start, a pause, a cancel sweep, hours opening or closing (the set of
 *   open jobs), all change it;
 * - the lease mark: its fencing token and whether it is live, and while it is not live the number
 *   of calls it records in flight — a broker taking the client, releasing it, dying (expiry), and a
 *   call settled after its broker left (which may leave a retry behind) change it. While a broker
 *   holds the client, the tasks it starts, settles, retries or defers are its own business: it
 *   releases the client when it has no work left, and that release changes the mark.
 * A hint whose marks both still match is trusted; any other is read again. Whatever a writer does
 * that no mark sees (a hint is only a cache), every hint that says "nothing ready" also expires
 * after a jittered `sweepEveryMs` (from half to all of it), so a quiet client's tasks are read again
 * at least that often, spread over runs: a client with ready work gets a broker within that time in
 * the worst case, and within a run in every case the marks see. A hint that says "ready" does not
 * expire: being wrong it only lists a client with nothing to do, whose broker takes the lease (the
 * lease mark changes), finds nothing and releases it (changes again), and the client is read; a
 * sweep of it would only confirm a listing that the next lease change checks anyway.
 */
import type { Job } from '#shared/jobs/model.ts';

export interface ReadyHint {
  readonly clientId: string;
  /** When the client's outstanding tasks were read. */
  readonly checkedAt: number;
  /** Until when the reading stands whatever the marks say (jittered sweep). */
  readonly expiresAt: number;
  readonly jobsMark: string;
  readonly leaseMark: string;
  /** The earliest `readyAt` found of an outstanding task of the open jobs; absent: none until `quietUntil`. */
  readonly nextReadyAt?: number;
  /** The end of the window that was read: with no `nextReadyAt`, nothing is ready before it. */
  readonly quietUntil: number;
}

/** A client's lease as the hint marks it. */
export interface LeaseState {
  readonly token: number;
  readonly expiresAt: number;
  /** Calls the lease records in flight. */
  readonly inFlight: number;
}

/** The jobs mark of a client's open jobs (order-insensitive). */
export function jobsMark(jobs: readonly Job[]): string {
  return jobs
    .map((job) => `${job.jobId}:${job.status}:${job.updatedAt}:${job.counts?.tasks ?? '-'}`)
    .sort()
    .join(',');
}

/** The lease mark at `now`: token and liveness, and the calls in flight while no broker is live. */
export function leaseMark(lease: LeaseState | undefined, now: number): string {
  if (!lease) return 'none';
  return now < lease.expiresAt ? `${lease.token}:live` : `${lease.token}:free:${lease.inFlight}`;
}

/**
 * What a hint says of "a task of the open jobs is ready by `readyBy`": true or false when it is
 * trusted, undefined when the tasks must be read (no hint, a mark changed, expired, or the quiet
 * window it read has passed).
 */
export function readyFromHint(
  hint: ReadyHint | undefined,
  marks: { readonly jobs: string; readonly lease: string },
  now: number,
  readyBy: number,
): boolean | undefined {
  if (!hint) return undefined;
  if (hint.jobsMark !== marks.jobs || hint.leaseMark !== marks.lease) return undefined;
  // "Ready" stands until a mark changes (see the module comment); "nothing ready" until its sweep.
  if (hint.nextReadyAt !== undefined && hint.nextReadyAt <= readyBy) return true;
  if (now >= hint.expiresAt) return undefined;
  if (hint.nextReadyAt !== undefined) return false;
  return readyBy <= hint.quietUntil ? false : undefined;
}

/**
 * `at + period × [0.5, 1)`, the fraction drawn from the key and `at`: hints made in the same run
 * come due over half a period, so the sweep after a mass start is spread over runs.
 */
export function jitteredDue(key: string, at: number, period: number): number {
  return at + Math.floor(period * (0.5 + hash(`${key}@${at}`) / 2 ** 33));
}

/**
 * True when the run at `now` is the one, of runs every `runEveryMs`, in which `key`'s turn of a
 * rotation of `period` falls: each key once a period, keys spread evenly over it, nothing stored
 * (a fresh instance keeps the same turns). A run that does not happen skips its keys' turn once.
 */
export function turnComes(key: string, now: number, period: number, runEveryMs: number): boolean {
  const phase = hash(key) % period;
  return Math.floor((now + phase) / period) !== Math.floor((now - runEveryMs + phase) / period);
}

/** FNV-1a of a string, unsigned 32 bits. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** True when two hints say the same (a run writes a hint only when it changed). */
export function sameHint(a: ReadyHint | undefined, b: ReadyHint): boolean {
  return (
    a !== undefined &&
    a.clientId === b.clientId &&
    a.checkedAt === b.checkedAt &&
    a.expiresAt === b.expiresAt &&
    a.jobsMark === b.jobsMark &&
    a.leaseMark === b.leaseMark &&
    a.nextReadyAt === b.nextReadyAt &&
    a.quietUntil === b.quietUntil
  );
}
