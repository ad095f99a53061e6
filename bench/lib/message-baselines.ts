/**
 * The baselines of bench/message-throughput, written as the designs they stand for would be, over
 * the same keep-alive transport as Switchboard's pipeline (so the figures compare designs, not
 * HTTP clients):
 *
 * - one at a time: claim a task, push it, await the answer, record it, next;
 * - the mass-mailing pipeline the issue cites: a producer fills a bounded queue, a FIXED pool of
 *   senders pushes one message each at a time (no token bucket, no multicast), a reporter writes
 *   outcomes in batches.
 */

import type { ClaimedTask, ReportSink, TaskOutcome, TaskSource } from '#shared/campaign/ports.ts';
import { compileTemplate } from '#shared/campaign/template.ts';
import type { PreparedSend, SendOutcome } from '#shared/line/messaging-client.ts';
import { preparePush } from '#shared/line/messaging-client.ts';
import { attemptKey } from '#shared/retry-keys.ts';
import { type LatencyHistogram, preciseClock } from './message-stats.ts';

export interface BaselineRun {
  readonly source: TaskSource;
  readonly send: (prepared: PreparedSend) => Promise<SendOutcome>;
  readonly report: ReportSink;
  readonly latency: LatencyHistogram;
}

function prepare(task: ClaimedTask): PreparedSend {
  return preparePush(
    task.recipient,
    compileTemplate(task.template).render(task.variables),
    attemptKey(task.jobId, task.taskId, task.attempt),
  );
}

function outcomeOf(task: ClaimedTask, result: SendOutcome): TaskOutcome {
  const ok = result.kind === 'delivered' || result.kind === 'already-delivered';
  return {
    jobId: task.jobId,
    taskId: task.taskId,
    attempt: task.attempt,
    kind: ok ? 'delivered' : 'failed',
    lastResult: result.kind,
    at: Date.now(),
  };
}

async function timed(run: BaselineRun, prepared: PreparedSend): Promise<SendOutcome> {
  const t0 = preciseClock.now();
  const result = await run.send(prepared);
  run.latency.record(preciseClock.now() - t0);
  return result;
}

/** Await each push before the next; returns the delivered count. */
export async function oneAtATime(run: BaselineRun): Promise<number> {
  let delivered = 0;
  for (;;) {
    const [task] = await run.source.nextPage(1);
    if (!task) return delivered;
    const outcome = outcomeOf(task, await timed(run, prepare(task)));
    if (outcome.kind === 'delivered') delivered++;
    await run.report.write([outcome]);
  }
}

/** Producer → bounded queue → `senders` fixed senders → batched reporter; returns the delivered count. */
export async function fixedPool(
  run: BaselineRun,
  options: { senders: number; queueSize: number; pageSize: number; reportBatch: number },
): Promise<number> {
  const queue: ClaimedTask[] = [];
  let done = false;
  const idleSenders: Array<() => void> = [];
  const wakeSenders = () => {
    for (const wake of idleSenders.splice(0)) wake();
  };
  let wakeProducer: (() => void) | undefined;
  const outcomes: TaskOutcome[] = [];
  let delivered = 0;

  async function producer(): Promise<void> {
    for (;;) {
      while (queue.length >= options.queueSize) await new Promise<void>((r) => (wakeProducer = r));
      const page = await run.source.nextPage(Math.min(options.pageSize, options.queueSize - queue.length));
      if (page.length === 0) break;
      queue.push(...page);
      wakeSenders();
    }
    done = true;
    wakeSenders();
  }

  async function sender(): Promise<void> {
    for (;;) {
      const task = queue.shift();
      if (!task) {
        if (done) return;
        await new Promise<void>((r) => idleSenders.push(r));
        continue;
      }
      wakeProducer?.();
      const outcome = outcomeOf(task, await timed(run, prepare(task)));
      if (outcome.kind === 'delivered') delivered++;
      outcomes.push(outcome);
      if (outcomes.length >= options.reportBatch) await run.report.write(outcomes.splice(0));
    }
  }

  await Promise.all([producer(), ...Array.from({ length: options.senders }, sender)]);
  if (outcomes.length > 0) await run.report.write(outcomes.splice(0));
  return delivered;
}
