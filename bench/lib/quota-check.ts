/**
 * LINE's per-endpoint pacing and the monthly-quota check, measured in one process against the LINE
 * sandbox keeping LINE's table (push 2,000/s, multicast 200/s per channel):
 *   - the pipeline sending a text without placeholders (multicasts only) for a few seconds, paced
 *     per endpoint (Switchboard) vs a baseline that paces multicasts at the push rate (one rate for
 *     both, as before): requests per second per endpoint and the 429s the sandbox answered; then
 *     pushes and multicasts together (Switchboard): pushes keep their rate beside the multicasts;
 *   - the quota check's cost: `QuotaGuard.admits` per claimed task vs accepting without it, and one
 *     reading of the quota (two GETs) against the sandbox, spread over a minute of sends at 2,000/s.
 */
import { startLineSandbox } from '#local/line-sandbox.ts';
import { DEFAULT_QUOTA_GUARD_SETTINGS, QuotaGuard } from '#shared/broker/quota-guard.ts';
import { runMessagePipeline } from '#shared/campaign/pipeline.ts';
import type { ClaimedTask, TaskSource } from '#shared/campaign/ports.ts';
import type { MessageTemplate } from '#shared/campaign/template.ts';
import type { Job } from '#shared/jobs/model.ts';
import { MessagingApiClient } from '#shared/line/messaging-client.ts';
import { LINE_RATE_LIMITS } from '#shared/line/rate-limits.ts';
import { silentLogger } from '#shared/log.ts';
import { freshCounts } from './seed-job.ts';

const PERSONAL: MessageTemplate = { messages: [{ type: 'text', text: 'Hello {{name}}' }] };
const SAME_FOR_ALL: MessageTemplate = { messages: [{ type: 'text', text: 'Closed tomorrow' }] };
const clock = { now: () => Date.now() };

export interface PacedFigures {
  readonly name: string;
  readonly seconds: number;
  readonly pushPerSecond: number;
  readonly multicastPerSecond: number;
  readonly push429: number;
  readonly multicast429: number;
}

/** Pages of multicast members (`mix` `multicast`) or alternating with pushes, generated as claimed, until `until`. */
function mixedSource(jobId: string, until: number, mix: 'multicast' | 'mixed'): TaskSource {
  let n = 0;
  let page = 0;
  return {
    async nextPage(limit) {
      if (Date.now() >= until) return [];
      const template = mix === 'mixed' && page++ % 2 === 0 ? PERSONAL : SAME_FOR_ALL;
      return Array.from({ length: limit }, (): ClaimedTask => {
        const i = n++;
        return {
          jobId,
          taskId: `T${i}`,
          recipient: `U${i.toString(16).padStart(32, '0')}`,
          variables: { name: `c${i}` },
          template,
          attempt: 1,
          attemptStartedAt: Date.now(),
        };
      });
    },
  };
}

/** The pipeline against the sandbox for `seconds`, multicasts paced at `multicastPerSecond`. */
export async function measurePacedRates(
  name: string,
  multicastPerSecond: number,
  seconds: number,
  mix: 'multicast' | 'mixed',
): Promise<PacedFigures> {
  const channel = { channelId: 'bench-quota', accessToken: `bench-${Math.random()}` };
  const sandbox = await startLineSandbox({ channels: [channel] });
  try {
    const client = new MessagingApiClient({ channelAccessToken: channel.accessToken, baseUrl: sandbox.url });
    const started = Date.now();
    await runMessagePipeline({
      source: mixedSource(`01BENCH${Math.random().toString(36).slice(2, 10)}`, started + seconds * 1000, mix),
      send: (prepared) => client.send(prepared),
      report: { write: async () => {} },
      rate: { perSecond: LINE_RATE_LIMITS.push, multicastPerSecond },
      clock,
    });
    const elapsed = (Date.now() - started) / 1000;
    const log = sandbox.log();
    const count = (path: string, status?: number) =>
      log.filter((r) => r.path.endsWith(path) && (status === undefined || r.status === status)).length;
    return {
      name,
      seconds: elapsed,
      pushPerSecond: count('/push', 200) / elapsed,
      multicastPerSecond: count('/multicast', 200) / elapsed,
      push429: count('/push', 429),
      multicast429: count('/multicast', 429),
    };
  } finally {
    await sandbox.stop();
  }
}

export interface QuotaCheckFigures {
  /** ns per claimed task: the guard's admission of a job already admitted. */
  readonly admitsNs: number;
  /** ns per claimed task without the check (an accept that says yes). */
  readonly baselineNs: number;
  /** ms per reading (GET quota + GET consumption) against the sandbox, median. */
  readonly readMs: number;
  /** µs of reading per message sent at 2,000/s, one reading a minute. */
  readonly readUsPerMessage: number;
}

export async function measureQuotaCheck(calls = 2_000_000, reads = 50): Promise<QuotaCheckFigures> {
  const channel = { channelId: 'bench-quota', accessToken: `bench-${Math.random()}` };
  const sandbox = await startLineSandbox({ channels: [channel], monthlyQuota: 10_000_000 });
  try {
    const client = new MessagingApiClient({ channelAccessToken: channel.accessToken, baseUrl: sandbox.url });
    const guard = new QuotaGuard({
      clientId: 'bench',
      channelId: channel.channelId,
      read: () => client.quota(),
      allowsPartial: () => false,
      onShort: () => {},
      clock,
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      logger: silentLogger,
      settings: DEFAULT_QUOTA_GUARD_SETTINGS,
    });
    await guard.ready();
    const job = {
      jobId: '01BENCHJOB',
      counts: freshCounts(1000),
    } as Job;
    guard.admits(job);
    const accept = (j: Job) => j.jobId.length > 0;
    const time = (fn: () => void) => {
      const t0 = process.hrtime.bigint();
      fn();
      return Number(process.hrtime.bigint() - t0) / calls;
    };
    let sink = 0;
    // Interleaved, twice, the second of each kept: the first warms the JIT.
    let admitsNs = 0;
    let baselineNs = 0;
    for (let round = 0; round < 2; round++) {
      baselineNs = time(() => {
        for (let i = 0; i < calls; i++) if (accept(job)) sink++;
      });
      admitsNs = time(() => {
        for (let i = 0; i < calls; i++) if (accept(job) && guard.admits(job)) sink++;
      });
    }
    if (sink < 0) console.log(sink);
    const durations: number[] = [];
    for (let i = 0; i < reads; i++) {
      const t0 = performance.now();
      await client.quota();
      durations.push(performance.now() - t0);
    }
    durations.sort((a, b) => a - b);
    const readMs = durations[Math.floor(durations.length / 2)]!;
    return { admitsNs, baselineNs, readMs, readUsPerMessage: (readMs * 1000) / (2000 * 60) };
  } finally {
    await sandbox.stop();
  }
}

export function pacedLines(figures: readonly PacedFigures[]): string[] {
  const lines = [
    "\nper-endpoint pacing against the sandbox keeping LINE's table (push 2,000/s, multicast 200/s):",
  ];
  for (const f of figures) {
    lines.push(
      `  ${f.name.padEnd(48)} push ${f.pushPerSecond.toFixed(0).padStart(5)} req/s, multicast ${f.multicastPerSecond.toFixed(0).padStart(4)} req/s accepted; 429s: push ${f.push429}, multicast ${f.multicast429} (${f.seconds.toFixed(1)} s)`,
    );
  }
  return lines;
}

export function quotaLines(f: QuotaCheckFigures): string[] {
  return [
    '\nthe monthly-quota check:',
    `  per claimed task: ${f.admitsNs.toFixed(1)} ns with QuotaGuard.admits vs ${f.baselineNs.toFixed(1)} ns without (+${(f.admitsNs - f.baselineNs).toFixed(1)} ns)`,
    `  one reading (GET quota + consumption, sandbox on 127.0.0.1): ${f.readMs.toFixed(2)} ms median; once a minute at 2,000 messages/s = ${f.readUsPerMessage.toFixed(4)} µs per message`,
  ];
}
