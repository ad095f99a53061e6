/**
 * The LINE sandbox of bench/message-throughput, in its own process (one core for it, one for the
 * contender); the bench starts a fresh one per contender, since the sandbox remembers every retry
 * key it accepted and a grown heap (longer GC pauses) would slow whoever comes next. Commands
 * arrive over IPC; each answer is a message back.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startLineSandbox } from '#local/line-sandbox.ts';

export const BENCH_CHANNEL = { channelId: '2000000099', accessToken: 'bench-message-throughput-token' };

export type SandboxCommand =
  | { readonly cmd: 'rate'; readonly perSecond: number | null }
  | { readonly cmd: 'stats' }
  /** Every request waits this long before it is handled, as a round trip to LINE would. */
  | { readonly cmd: 'latency'; readonly ms: number }
  | { readonly cmd: 'reset' }
  | { readonly cmd: 'stop' };

/** What the sandbox saw since the last reset. */
export interface SandboxStats {
  readonly requests: number;
  readonly byStatus: Readonly<Record<string, number>>;
  /** Recipients that got at least one message. */
  readonly recipients: number;
  /** Deliveries beyond the first to the same recipient (must be 0). */
  readonly duplicates: number;
  /** The sandbox's event-loop delay since the reset (ms): p99 and max. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /** The sandbox process's V8 heap in use now, in MB. */
  readonly heapUsedMb: number;
}

if (process.send) {
  const sandbox = await startLineSandbox({ channels: [BENCH_CHANNEL] });
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  process.on('message', async (message: SandboxCommand) => {
    switch (message.cmd) {
      case 'rate':
        // IPC is JSON: Infinity travels as null.
        sandbox.setRateLimit(message.perSecond ?? Number.POSITIVE_INFINITY);
        return process.send!({ ok: true });
      case 'latency':
        sandbox.faults.setProbabilities(message.ms > 0 ? { delay: { probability: 1, ms: message.ms } } : {});
        return process.send!({ ok: true });
      case 'reset':
        sandbox.resetRecords();
        loopDelay.reset();
        return process.send!({ ok: true });
      case 'stats': {
        const counters = sandbox.counters();
        let total = 0;
        for (const n of counters.perRecipient.values()) total += n;
        return process.send!({
          requests: counters.requests,
          byStatus: counters.byStatus,
          recipients: counters.perRecipient.size,
          duplicates: total - counters.perRecipient.size,
          loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
          loopDelayMaxMs: loopDelay.max / 1e6,
          heapUsedMb: process.memoryUsage().heapUsed / 2 ** 20,
        } satisfies SandboxStats);
      }
      case 'stop':
        await sandbox.stop();
        process.send!({ ok: true });
        return process.disconnect();
    }
  });
  process.send({ url: sandbox.url });
}
