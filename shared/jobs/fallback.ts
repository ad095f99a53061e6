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

/** Where a task goes when it leaves its channel: the next one it can be reached on. */
export interface NextChannel {
  /** The channel it leaves. */
  readonly from: MessageChannel;
  readonly channel: MessageChannel;
  /** Its identifier there. */
  readonly recipient: string;
  /** The channels between, each skipped for want of an identifier. */
  readonly skipped: readonly TriedChannel[];
}

/**
 * The channel after the task's current one that it has an identifier for; undefined when none is
 * left, or the job does not fall back (the task then ends on its channel as any task would).
 */
export function nextChannel(
  job: Pick<Job, 'channel' | 'fallback'>,
  task: Pick<Task, 'via' | 'reach'>,
): NextChannel | undefined {
  if (job.fallback === undefined) return undefined;
  const from = taskChannelOf(task, job) as MessageChannel;
  const channels = channelsOf(job) as readonly MessageChannel[];
  const skipped: TriedChannel[] = [];
  for (const channel of channels.slice(channels.indexOf(from) + 1)) {
    const recipient = task.reach?.[channel];
    if (recipient !== undefined) return { from, channel, recipient, skipped };
    skipped.push({ channel, reason: NO_IDENTIFIER });
  }
  return undefined;
}

/** What a task leaving for `next` because of `reason` has tried: the channel it leaves, then those skipped. */
export function triedOnLeaving(next: NextChannel, reason: string): TriedChannel[] {
  return [{ channel: next.from, reason }, ...next.skipped];
}

/** The report's `tried` cell: `line: opted-out; email: no-identifier`. */
export function triedCell(tried: readonly TriedChannel[] | undefined): string | undefined {
  if (tried === undefined || tried.length === 0) return undefined;
  return tried.map((t) => `${t.channel}: ${t.reason}`).join('; ');
}
