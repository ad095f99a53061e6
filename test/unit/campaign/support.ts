/**
 * In-memory ports for the message pipeline's tests: a task source over an array, and a sink that
 * keeps every outcome written (so a test can check each task was written exactly once).
 */

import type { ClaimedTask, ReportSink, TaskOutcome, TaskSource } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import { newUlid } from '#shared/ids.ts';

export const CHANNEL = { channelId: '2000000001', accessToken: 'test-message-pipeline-token' };

export const PERSONAL: MessageTemplate = {
  messages: [{ type: 'text', text: 'Hello {{name}}, your order {{order}} ships today.' }],
};
export const SAME_FOR_ALL: MessageTemplate = {
  messages: [{ type: 'text', text: 'Our store opens at 10:00 tomorrow.' }],
};

/** A LINE user id (U + 32 hex digits) for recipient number `i`. */
export function userId(i: number): string {
  return `U${i.toString(16).padStart(32, '0')}`;
}

export function makeTasks(
  count: number,
  template: MessageTemplate,
  options: { jobId?: string; attempt?: number; attemptStartedAt?: number; from?: number } = {},
): ClaimedTask[] {
  // A fresh job each time: the sandbox remembers retry keys across tests, as LINE would.
  const jobId = options.jobId ?? newUlid();
  return Array.from({ length: count }, (_, k) => {
    const i = (options.from ?? 0) + k;
    return {
      jobId,
      taskId: `T${String(i).padStart(7, '0')}`,
      recipient: userId(i),
      variables: { name: `Customer ${i}`, order: `#${1000 + i}` },
      template,
      attempt: options.attempt ?? 1,
      attemptStartedAt: options.attemptStartedAt ?? Date.now(),
    };
  });
}

export interface MemorySource extends TaskSource {
  claimed: number;
  /** Tasks not claimed yet. */
  remaining(): number;
  /** `limit` of every call, in order. */
  readonly limits: number[];
}

export function memorySource(
  tasks: readonly ClaimedTask[],
  onPage?: (claimed: number) => void,
): MemorySource {
  let next = 0;
  const source: MemorySource = {
    claimed: 0,
    limits: [],
    remaining: () => tasks.length - next,
    async nextPage(limit) {
      source.limits.push(limit);
      const page = tasks.slice(next, next + limit);
      next += page.length;
      source.claimed += page.length;
      onPage?.(source.claimed);
      return page;
    },
  };
  return source;
}

export interface MemorySink extends ReportSink {
  readonly outcomes: TaskOutcome[];
  readonly writes: number[];
  /** Outcomes per task id: each must be 1. */
  countsByTask(): Map<string, number>;
}

export function memorySink(options: { failFirst?: number } = {}): MemorySink {
  let failures = options.failFirst ?? 0;
  const sink: MemorySink = {
    outcomes: [],
    writes: [],
    async write(outcomes) {
      if (failures > 0) {
        failures--;
        throw new Error('ProvisionedThroughputExceededException (test)');
      }
      sink.writes.push(outcomes.length);
      sink.outcomes.push(...outcomes);
    },
    countsByTask() {
      const counts = new Map<string, number>();
      for (const o of sink.outcomes) counts.set(o.taskId, (counts.get(o.taskId) ?? 0) + 1);
      return counts;
    },
  };
  return sink;
}
