/**
 * The pipeline's bounded queue of send units: claimed tasks become single sends (one task, its own
 * retry key) or batches (up to the channel's recipients per request — LINE's multicast of 500, SES's
 * bulk send of 50 — of one job, attempt and content, under a key derived from their sorted ids),
 * sealed in FIFO order for the senders. Which tasks may share a request is the transport's call
 * (`MessageTransport.groupOf`). `ahead` counts the claimed tasks not yet taken by a sender; the
 * producer keeps it under the capacity.
 */
import { attemptKey, multicastRetryKey } from '#shared/retry-keys.ts';
import type { ClaimedTask } from './ports.ts';
import { Signal } from './signal.ts';
import type { MessageTemplate } from './template.ts';

/** One request's worth of tasks: a single send (one task) or a batch (several, one request). */
export interface SendUnit<T extends object = MessageTemplate> {
  /** LINE's words for the two shapes: `push` (one recipient) and `multicast` (a batch). */
  readonly endpoint: 'push' | 'multicast';
  /** Sorted by task id for a batch, so the same batch always serialises to the same bytes. */
  readonly tasks: readonly ClaimedTask<T>[];
  readonly retryKey: string;
  /** A batch resumed from an earlier claim: already in the ledger. */
  readonly recorded: boolean;
  /** The earliest first start of its tasks' attempts: the retry key's window counts from it. */
  readonly startedAt: number;
}

export function pushUnit<T extends object>(task: ClaimedTask<T>): SendUnit<T> {
  return {
    endpoint: 'push',
    recorded: false,
    tasks: [task],
    retryKey: attemptKey(task.jobId, task.taskId, task.attempt),
    startedAt: task.attemptStartedAt,
  };
}

export function multicastUnit<T extends object>(
  tasks: readonly ClaimedTask<T>[],
  recordedKey?: string,
): SendUnit<T> {
  const sorted = [...tasks].sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
  const first = sorted[0]!;
  return {
    endpoint: 'multicast',
    recorded: recordedKey !== undefined,
    tasks: sorted,
    retryKey:
      recordedKey ??
      multicastRetryKey(
        first.jobId,
        first.attempt,
        sorted.map((t) => t.taskId),
      ),
    startedAt: Math.min(...sorted.map((t) => t.attemptStartedAt)),
  };
}

export class SendQueue<T extends object = MessageTemplate> {
  readonly capacity: number;
  /** Claimed tasks not yet taken by a sender. */
  ahead = 0;
  /** Notified when units were sealed. */
  readonly unitReady = new Signal();
  /** Notified when a sender took a unit. */
  readonly roomFreed = new Signal();
  readonly #batchLimit: number;
  readonly #multicast: boolean;
  /** The transport's grouping: tasks of one group (and job and attempt) may share a request. */
  readonly #groupOf: (template: T) => string | undefined;
  #queue: (SendUnit<T> | undefined)[] = [];
  #head = 0;
  /** Open batches still filling, by group. */
  readonly #open = new Map<string, ClaimedTask<T>[]>();
  readonly #templateKeys = new WeakMap<object, string | null>();

  constructor(options: {
    capacity: number;
    batchLimit: number;
    multicast: boolean;
    groupOf: (template: T) => string | undefined;
  }) {
    this.capacity = options.capacity;
    this.#batchLimit = options.batchLimit;
    this.#multicast = options.multicast && options.batchLimit > 1;
    this.#groupOf = options.groupOf;
  }

  get hasOpenBatches(): boolean {
    return this.#open.size > 0;
  }

  /** A claimed task to send: alone, or into its multicast group (sealed when full). */
  add(task: ClaimedTask<T>): void {
    this.ahead++;
    const key = this.#multicast ? this.#groupKey(task) : undefined;
    if (key === undefined) {
      this.#queue.push(pushUnit(task));
      return;
    }
    const batch = this.#open.get(key);
    if (batch) batch.push(task);
    else this.#open.set(key, [task]);
    if ((batch?.length ?? 1) >= this.#batchLimit) this.#seal(key);
  }

  /** A multicast resumed as it was recorded: same key, same members, same bytes. */
  addRecorded(retryKey: string, tasks: readonly ClaimedTask<T>[]): void {
    this.ahead += tasks.length;
    this.#queue.push(multicastUnit(tasks, retryKey));
  }

  /** Seals every open batch and wakes the senders. */
  sealAll(): void {
    for (const key of [...this.#open.keys()]) this.#seal(key);
    this.unitReady.notify();
  }

  /** The next unit, not taken. */
  peek(): SendUnit<T> | undefined {
    return this.#queue[this.#head];
  }

  take(): SendUnit<T> | undefined {
    if (this.#head >= this.#queue.length) return undefined;
    const unit = this.#queue[this.#head]!;
    // Drop the reference at once: a consumed multicast slot would otherwise keep 500 tasks alive.
    this.#queue[this.#head++] = undefined;
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.ahead -= unit.tasks.length;
    this.roomFreed.notify();
    return unit;
  }

  #seal(key: string): void {
    const tasks = this.#open.get(key);
    if (!tasks) return;
    this.#open.delete(key);
    // A batch of one goes as a push with the task's own key: nothing to record.
    this.#queue.push(tasks.length === 1 ? pushUnit(tasks[0]!) : multicastUnit(tasks));
  }

  /** The batch group of a task, or undefined when its content differs per recipient. */
  #groupKey(task: ClaimedTask<T>): string | undefined {
    let key = this.#templateKeys.get(task.template);
    if (key === undefined) {
      key = this.#groupOf(task.template) ?? null;
      this.#templateKeys.set(task.template, key);
    }
    return key === null ? undefined : `${task.jobId} ${task.attempt} ${key}`;
  }
}
