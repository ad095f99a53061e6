/**
 * bench/message-throughput: how fast a `message` job goes out, and at what memory.
 *
 * One run, against the same local LINE sandbox (its own process, rate limit lifted), each
 * contender in its own child process (so peak RSS is its own), all over the same keep-alive
 * HTTP transport (so the figures compare designs):
 *   - Switchboard's pipeline (shared/messaging/pipeline.ts): claimed pages → bounded queue →
 *     paced senders → batched reporter; personalised messages by push, a text without variables
 *     by multicast (500 recipients a request);
 *   - (a) one at a time: await each push before the next (on fewer messages: it is slow; the
 *     time for the full list is extrapolated and labelled so);
 *   - (b) the mass-mailing design the issue cites: producer → bounded queue → a FIXED pool of
 *     100 senders → batched reporter, no token bucket, no multicast;
 *   - (c) the sandbox's own ceiling: autocannon in a worker thread POSTing valid pushes with fresh
 *     retry keys.
 * Then the rate-limit scenario: the sandbox at 2,000 requests/s, Switchboard paced at 2,000/s for
 * ~15 s: the sends/s it holds and the 429s the sandbox answered.
 *
 *   npm run bench:message-throughput [-- --messages 100000 --one-at-a-time 5000 --million]
 *     --latency-ms 50   every sandbox request waits 50 ms first (a round trip to LINE; default 0)
 *     --concurrency N   Switchboard's senders (default 64)
 *     --rate-only       only the 2,000/s scenario
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { ContenderRequest } from './lib/message-contender.ts';
import type { CeilingRequest, CeilingResult } from './lib/message-load-worker.ts';
import { BENCH_CHANNEL, type SandboxCommand, type SandboxStats } from './lib/message-sandbox.ts';
import type { ContenderResult } from './lib/message-stats.ts';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '100000' },
    'one-at-a-time': { type: 'string', default: '5000' },
    million: { type: 'boolean', default: false },
    'ceiling-seconds': { type: 'string', default: '10' },
    'rate-seconds': { type: 'string', default: '15' },
    concurrency: { type: 'string', default: '64' },
    'latency-ms': { type: 'string', default: '0' },
    'rate-only': { type: 'boolean', default: false },
  },
});
const messages = Number(values.messages);
const oneAtATimeMessages = Number(values['one-at-a-time']);
const ceilingSeconds = Number(values['ceiling-seconds']);
const rateSeconds = Number(values['rate-seconds']);
const concurrency = Number(values.concurrency);
const latencyMs = Number(values['latency-ms']);
// Enough connections that the sandbox, not the round trip, is what limits the load generator.
const ceilingConnections = Math.max(64, concurrency);
const LINE_RATE = 2000;

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

function child(path: string, args: string[] = []): ChildProcess {
  return spawn(process.execPath, [here(path), ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

function nextMessage<T>(proc: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`child exited with ${code} before answering`));
    proc.once('exit', onExit);
    proc.once('message', (m) => {
      proc.off('exit', onExit);
      resolve(m as T);
    });
  });
}

const sandboxProc = child('./lib/message-sandbox.ts');
const { url } = await nextMessage<{ url: string }>(sandboxProc);
async function sandbox<T = { ok: true }>(command: SandboxCommand): Promise<T> {
  const answer = nextMessage<T>(sandboxProc);
  sandboxProc.send(command);
  return answer;
}

let runs = 0;
interface Row extends ContenderResult {
  readonly sandbox: SandboxStats;
}

async function contender(
  name: string,
  kind: ContenderRequest['kind'],
  count: number,
  template: ContenderRequest['template'],
  extra: Partial<ContenderRequest> = {},
): Promise<Row> {
  await sandbox({ cmd: 'reset' });
  const request: ContenderRequest = {
    name,
    kind,
    url,
    accessToken: BENCH_CHANNEL.accessToken,
    messages: count,
    template,
    run: ++runs,
    concurrency,
    ...extra,
  };
  const proc = child('./lib/message-contender.ts', [JSON.stringify(request)]);
  const result = await nextMessage<ContenderResult>(proc);
  await new Promise((r) => proc.once('exit', r));
  const stats = await sandbox<SandboxStats>({ cmd: 'stats' });
  if (stats.recipients !== count || stats.duplicates !== 0) {
    console.log(
      `!! ${name}: the sandbox counted ${stats.recipients} recipients (want ${count}), ${stats.duplicates} duplicates`,
    );
  }
  console.error(`  … ${name}: ${fmt(count)} messages in ${fmt(result.seconds, 1)} s`);
  return { ...result, sandbox: stats };
}

function ceiling(): Promise<CeilingResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(here('./lib/message-load-worker.ts'), {
      workerData: {
        url,
        accessToken: BENCH_CHANNEL.accessToken,
        seconds: ceilingSeconds,
        connections: ceilingConnections,
      } satisfies CeilingRequest,
    });
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const rate = (r: ContenderResult) => r.messages / r.seconds;

try {
  console.log(
    `message-throughput: ${fmt(messages)} messages to the local LINE sandbox (rate limit lifted${latencyMs > 0 ? `, ${latencyMs} ms added to every request` : ''}), each contender in its own process, same keep-alive HTTP transport; ${availableParallelism()} cores\n`,
  );
  if (!values['rate-only']) {
    await sandbox({ cmd: 'rate', perSecond: null });
    if (latencyMs > 0) await sandbox({ cmd: 'latency', ms: latencyMs });
    // Warm the sandbox (JIT, its maps) so the first contender does not pay for it.
    await contender('warm-up', 'switchboard', 5000, 'personal');

    await sandbox({ cmd: 'reset' });
    const cap = await ceiling();
    // autocannon stops with requests still waiting in the sandbox: let them land before the next count.
    await new Promise((r) => setTimeout(r, latencyMs + 1000));
    const oneByOne = await contender(
      '(a) one at a time (await each push)',
      'one-at-a-time',
      oneAtATimeMessages,
      'personal',
    );
    const pool = await contender(
      '(b) fixed pool: queue + 100 senders + reporter',
      'fixed-pool',
      messages,
      'personal',
      {
        concurrency: 100,
      },
    );
    const push = await contender('switchboard, personalised (push)', 'switchboard', messages, 'personal');
    const multi = await contender('switchboard, same text (multicast ×500)', 'switchboard', messages, 'same');
    let million: { push: Row; multi: Row } | undefined;
    if (values.million) {
      console.log(
        '--million: 1,000,000 personalised messages (push) and 1,000,000 by multicast; the push run takes minutes…\n',
      );
      million = {
        push: await contender('switchboard, personalised (push), 1M', 'switchboard', 1_000_000, 'personal'),
        multi: await contender(
          'switchboard, same text (multicast ×500), 1M',
          'switchboard',
          1_000_000,
          'same',
        ),
      };
    }

    const rows: Row[] = [oneByOne, pool, push, multi, ...(million ? [million.push, million.multi] : [])];
    const pad = (s: string, n: number) => s.padEnd(n);
    const padL = (s: string, n: number) => s.padStart(n);
    console.log(
      `${pad('contender', 50)} ${padL('messages', 10)} ${padL('requests', 10)} ${padL('msgs/s', 10)} ${padL('req/s', 8)} ${padL('p50 ms', 7)} ${padL('p99 ms', 7)} ${padL('peak RSS', 9)} ${padL('heap', 7)} dup`,
    );
    for (const r of rows) {
      console.log(
        `${pad(r.name, 50)} ${padL(fmt(r.messages), 10)} ${padL(fmt(r.requests), 10)} ${padL(fmt(rate(r)), 10)} ${padL(fmt(r.requests / r.seconds), 8)} ${padL(fmt(r.p50Ms, 1), 7)} ${padL(fmt(r.p99Ms, 1), 7)} ${padL(`${fmt(r.peakRssMb)} MB`, 9)} ${padL(`${fmt(r.peakHeapUsedMb)} MB`, 7)} ${r.sandbox.duplicates}`,
      );
    }
    console.log(
      `${pad(`(c) sandbox ceiling: autocannon, ${ceilingConnections} connections`, 50)} ${padL('-', 10)} ${padL(fmt(cap.rps * ceilingSeconds), 10)} ${padL('-', 10)} ${padL(fmt(cap.rps), 8)} ${padL(fmt(cap.p50, 1), 7)} ${padL(fmt(cap.p99, 1), 7)} ${padL('-', 9)} ${padL('-', 7)} (${cap.non2xx + cap.errors} non-2xx/errors)`,
    );
    if (oneAtATimeMessages !== messages) {
      console.log(
        `\n(a) ran on ${fmt(oneAtATimeMessages)} messages only; EXTRAPOLATED at its measured rate, ${fmt(messages)} would take ${fmt(messages / rate(oneByOne))} s (vs ${fmt(push.seconds, 1)} s push, ${fmt(multi.seconds, 1)} s multicast).`,
      );
    }
    console.log('\nratios (messages/s):');
    console.log(`  switchboard push      / (a) one at a time: ×${fmt(rate(push) / rate(oneByOne), 1)}`);
    console.log(`  switchboard push      / (b) fixed pool:    ×${fmt(rate(push) / rate(pool), 2)}`);
    console.log(`  switchboard multicast / (a) one at a time: ×${fmt(rate(multi) / rate(oneByOne), 0)}`);
    console.log(`  switchboard multicast / (b) fixed pool:    ×${fmt(rate(multi) / rate(pool), 0)}`);
    console.log(
      `  requests/s vs (c) the sandbox's ceiling: push ${fmt((100 * push.requests) / push.seconds / cap.rps)} %, fixed pool ${fmt((100 * pool.requests) / pool.seconds / cap.rps)} %, one at a time ${fmt((100 * oneByOne.requests) / oneByOne.seconds / cap.rps)} %`,
    );
    console.log(
      `  multicast cut the requests ×${fmt(push.requests / multi.requests)} (${fmt(push.requests)} → ${fmt(multi.requests)})`,
    );
    if (million) {
      for (const [small, big] of [
        [push, million.push],
        [multi, million.multi],
      ] as const) {
        const growth = big.peakRssMb / small.peakRssMb - 1;
        console.log(
          `\npeak RSS ${small.name}: ${fmt(small.peakRssMb)} MB at ${fmt(small.messages)}, ${fmt(big.peakRssMb)} MB at ${fmt(big.messages)} → ${growth >= 0 ? '+' : ''}${fmt(100 * growth, 1)} % (${Math.abs(growth) <= 0.1 ? 'within' : 'NOT within'} 10 %); peak heap in use ${fmt(small.peakHeapUsedMb)} → ${fmt(big.peakHeapUsedMb)} MB`,
        );
        if (small.seconds < 5) {
          console.log(
            `  (the ${fmt(small.messages)} run lasted ${fmt(small.seconds, 1)} s, ${fmt(small.requests)} requests: too short for V8's heap to reach the size it settles at under this allocation rate)`,
          );
        }
      }
    }
  }

  // The channel's real limit: the sandbox at 2,000 requests/s, Switchboard paced at the same.
  await sandbox({ cmd: 'rate', perSecond: LINE_RATE });
  const paced = await contender(
    `switchboard paced at ${LINE_RATE}/s, ~${rateSeconds} s`,
    'switchboard',
    LINE_RATE * rateSeconds,
    'personal',
    // Little's law: 2,000/s at tens of ms per request needs more requests in flight.
    { rate: LINE_RATE, concurrency: 128 },
  );
  // Between the first and the last request's start: the pace itself, not start-up or the last answer.
  const held = ((paced.requests - 1) * 1000) / (paced.lastSendAt - paced.firstSendAt);
  const tooMany = paced.sandbox.byStatus['429'] ?? 0;
  console.log(
    `\nrate limit ${fmt(LINE_RATE)}/s: ${fmt(paced.requests)} sends, ${fmt((paced.lastSendAt - paced.firstSendAt) / 1000, 2)} s from first to last = ${fmt(held)} sends/s held (${fmt(paced.requests / paced.seconds)}/s over the whole run of ${fmt(paced.seconds, 1)} s) (goal 1,950–2,000: ${held >= 1950 && held <= 2000 ? 'met' : 'MISSED'}), sandbox 429s: ${tooMany} (goal 0), p99 ${fmt(paced.p99Ms, 1)} ms, duplicates ${paced.sandbox.duplicates}`,
  );
} finally {
  await sandbox({ cmd: 'stop' }).catch(() => undefined);
  sandboxProc.kill();
}
