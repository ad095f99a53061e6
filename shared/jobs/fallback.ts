/**
 * Fallback: a job that names more than one message channel (`channel: ['line', 'email', 'sms']`)
 * tries its channels in order for each task. When the channel a task is on cannot reach its person —
 * opted out of it, or suppressed on it alone — the task moves to the next channel it has an
 * identifier for, inside the same job and the same contact-limit slot; the channels it left, and
 * why, stay on it (`Task.tried`) and the report shows them (`docs/fallback.md`).
 */
import {
  channelsOf,
  type Job,
  type MessageChannel,
  type Task,
  type TriedChannel,
  taskChannelOf,
} from './model.ts';

/** Why a task left a channel it had no identifier for. */
export const NO_IDENTIFIER = 'no-identifier';

/** Where a task goes when it leaves its channel: the next one it can be reached on, and what it left. */
export interface NextChannel {
  readonly channel: MessageChannel;
  readonly recipient: string;
  /** The channel left (with `reason`), then each skipped for want of an identifier. */
  readonly tried: readonly TriedChannel[];
}

/**
 * The channel after the task's current one that it has an identifier for, leaving the current one
 * for `reason`; undefined when none is left (the task then ends on its channel as any task would).
 */
export function nextChannel(
  job: Pick<Job, 'channel' | 'fallback'>,
  task: Pick<Task, 'via' | 'reach'>,
  reason: string,
): NextChannel | undefined {
  if (job.fallback === undefined) return undefined;
  const current = taskChannelOf(task, job) as MessageChannel;
  const channels = channelsOf(job) as readonly MessageChannel[];
  const tried: TriedChannel[] = [{ channel: current, reason }];
  for (const channel of channels.slice(channels.indexOf(current) + 1)) {
    const recipient = task.reach?.[channel];
    if (recipient !== undefined) return { channel, recipient, tried };
    tried.push({ channel, reason: NO_IDENTIFIER });
  }
  return undefined;
}

/** The report's `tried` cell: `line: opted-out; email: no-identifier`. */
export function triedCell(tried: readonly TriedChannel[] | undefined): string | undefined {
  if (tried === undefined || tried.length === 0) return undefined;
  return tried.map((t) => `${t.channel}: ${t.reason}`).join('; ');
}
