/**
 * The pipeline's bounded queue of send units: claimed tasks become pushes (one task, its own
 * retry key) or multicasts (up to 500 tasks of one job, attempt and message, under a key derived
 * from their sorted ids), sealed in FIFO order for the senders. `ahead` counts the claimed tasks
 * not yet taken by a sender; the producer keeps it under the capacity.
 */
import { attemptKey, multicastRetryKey } from '#shared/retry-keys.ts';
import type { ClaimedTask } from './ports.ts';
import { Signal } from './signal.ts';
import { compileTemplate } from './template.ts';

/** One request's worth of tasks: a push (one task) or a multicast (up to 500). */
export interface SendUnit {
  readonly endpoint: 'push' | 'multicast';
  /** Sorted by task id for a multicast, so the same batch always serialises to the same bytes. */
  readonly tasks: readonly ClaimedTask[];
  readonly retryKey: string;
  /** A multicast resumed from an earlier claim: already in the ledger. */
  readonly recorded: boolean;
  /** The earliest first start of its tasks' attempts: the retry key's window counts from it. */
  readonly startedAt: number;
}

export function pushUnit(task: ClaimedTask): SendUnit {
  return {
    endpoint: 'push',
    recorded: false,
    tasks: [task],
    retryKey: attemptKey(task.jobId, task.taskId, task.attempt),
    startedAt: task.attemptStartedAt,
  };
}

export function multicastUnit(tasks: readonly ClaimedTask[], recordedKey?: string): SendUnit {
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

export class SendQueue {
  readonly capacity: number;
  /** Claimed tasks not yet taken by a sender. */
  ahead = 0;
  /** Notified when units were sealed. */
  readonly unitReady = new Signal();
  /** Notified when a sender took a unit. */
  readonly roomFreed = new Signal();
  readonly #batchLimit: number;
  readonly #multicast: boolean;
  #queue: (SendUnit | undefined)[] = [];
  #head = 0;
  /** Open multicast batches still filling, by group. */
  readonly #open = new Map<string, ClaimedTask[]>();
  /** Each distinct message (by content) of this run gets a small number. */
  readonly #messageIds = new Map<string, number>();
  readonly #templateKeys = new WeakMap<object, number | null>();

  constructor(options: { capacity: number; batchLimit: number; multicast: boolean }) {
    this.capacity = options.capacity;
    this.#batchLimit = options.batchLimit;
    this.#multicast = options.multicast;
  }

  get hasOpenBatches(): boolean {
    return this.#open.size > 0;
  }

  /** A claimed task to send: alone, or into its multicast group (sealed when full). */
  add(task: ClaimedTask): void {
    this.ahead++;
    const key = this.#multicast ? this.#groupOf(task) : undefined;
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
  addRecorded(retryKey: string, tasks: readonly ClaimedTask[]): void {
    this.ahead += tasks.length;
    this.#queue.push(multicastUnit(tasks, retryKey));
  }

  /** Seals every open batch and wakes the senders. */
  sealAll(): void {
    for (const key of [...this.#open.keys()]) this.#seal(key);
    this.unitReady.notify();
  }

  /** The next unit, not taken. */
  peek(): SendUnit | undefined {
    return this.#queue[this.#head];
  }

  take(): SendUnit | undefined {
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

  /** The multicast group of a task, or undefined when its message differs per recipient. */
  #groupOf(task: ClaimedTask): string | undefined {
    let key = this.#templateKeys.get(task.template);
    if (key === undefined) {
      let compiled: ReturnType<typeof compileTemplate> | undefined;
      try {
        compiled = compileTemplate(task.template);
      } catch {
        compiled = undefined; // sent alone, where the error becomes the task's reason
      }
      if (compiled && compiled.variables.length === 0) {
        const content = JSON.stringify([task.template.messages, task.template.notificationDisabled ?? null]);
        key = this.#messageIds.get(content) ?? this.#messageIds.size;
        this.#messageIds.set(content, key);
      } else key = null;
      this.#templateKeys.set(task.template, key);
    }
    return key === null ? undefined : `${task.jobId} ${task.attempt} ${key}`;
  }
}
