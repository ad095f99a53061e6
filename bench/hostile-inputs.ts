/**
 * bench/hostile-inputs: what the hardening of issue 13 buys, side by side with what it replaced,
 * in one run, on the real code.
 *
 * 1. A keyword rule `^(a|a)*$` (accepted by the old check) against a LINE text of n `a`s and `!`:
 *    JavaScript's backtracking RegExp (the old matcher; its time doubles with every `a`, so it is
 *    run up to `--max-backtrack-n` only and extrapolated to 29, the text of the probe that stalled
 *    a process for ~22 s) against `answerFor` on RE2 (re2js), at 29 and at 2,000 (the longest
 *    text a rule is matched against).
 * 2. A signed delivery of 10 events, one of them nested `--depth` levels deep: the receiver now
 *    queues the 9 and sets the deep one aside; the old path re-serialised every event with
 *    `JSON.stringify`, which overflows the stack and failed the whole delivery (a 500, for ever).
 *
 *   npm run bench:hostile-inputs [-- --max-backtrack-n 24 --depth 5000]
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { channelFromInput } from '#shared/channels/channel-input.ts';
import { answerFor } from '#shared/channels/keyword-rules.ts';
import { signBody } from '#shared/line/signature.ts';
import { makeReceiveWebhook } from '#shared/webhooks/receive.ts';

const { values } = parseArgs({
  options: { 'max-backtrack-n': { type: 'string' }, depth: { type: 'string' } },
});
const maxBacktrackN = Number(values['max-backtrack-n'] ?? 24);
const depth = Number(values.depth ?? 5_000);

const ms = (f: () => unknown): number => {
  const start = performance.now();
  f();
  return performance.now() - start;
};
const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 1 ? n.toFixed(1) : n.toFixed(3));

// 1. The keyword rule.
const pattern = '^(a|a)*$';
const channel = channelFromInput(
  {
    channelId: 'bench',
    clientId: 'bench',
    channelSecret: 'bench-channel-secret',
    accessToken: 'bench-access-token',
    rules: [{ match: 'regex', pattern, answer: 'matched' }],
    fallback: 'no match',
  },
  Date.now(),
);
const text = (n: number) => `${'a'.repeat(n)}!`;
console.log(`1. keyword rule ${pattern} against n × "a" + "!" (no match: the worst case)`);
console.log('   n      backtracking RegExp (ms)   RE2 answerFor (ms)');
const backtracking = new RegExp(pattern);
let last = { n: 0, ms: 0 };
for (let n = 16; n <= maxBacktrackN; n += 2) {
  const old = ms(() => backtracking.test(text(n)));
  const re2 = ms(() => answerFor(channel, text(n)));
  last = { n, ms: old };
  console.log(`   ${String(n).padEnd(6)} ${fmt(old).padStart(24)}   ${fmt(re2).padStart(18)}`);
}
// Each extra `a` doubles the backtracking work.
const extrapolated29 = last.ms * 2 ** (29 - last.n);
const re2At29 = Math.min(...Array.from({ length: 5 }, () => ms(() => answerFor(channel, text(29)))));
const re2AtMax = Math.min(...Array.from({ length: 5 }, () => ms(() => answerFor(channel, text(1_999)))));
console.log(
  `   29     ${`~${fmt(extrapolated29)} (extrapolated)`.padStart(24)}   ${fmt(re2At29).padStart(18)}   → ${fmt(extrapolated29 / re2At29)}× faster`,
);
console.log(`   1,999  ${'(would never end)'.padStart(24)}   ${fmt(re2AtMax).padStart(18)}`);

// 2. The deep event.
const events = Array.from({ length: 10 }, (_, i) => ({
  type: 'message',
  mode: 'active',
  timestamp: Date.now(),
  webhookEventId: `01BENCH${String(i).padStart(19, '0')}`,
  deliveryContext: { isRedelivery: false },
  source: { type: 'user', userId: `U${String(i).padStart(32, '0')}` },
  replyToken: `reply-${i}`,
  message: { id: String(i), type: 'text', text: 'hello', quoteToken: `q${i}` },
}));
const deepValue = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
const rawBody = Buffer.from(
  JSON.stringify({ destination: 'Ubench', events }).replace(
    '"text":"hello"',
    `"text":"hello","deep":${deepValue}`,
  ),
);
const queued: number[] = [];
const receive = makeReceiveWebhook({
  channels: { get: async () => channel },
  queue: {
    async enqueue(entries) {
      queued.push(entries.length);
    },
  },
  clock: { now: () => Date.now() },
});
const start = performance.now();
const result = await receive({
  channelId: 'bench',
  headers: { 'x-line-signature': signBody(rawBody, 'bench-channel-secret') },
  rawBody,
});
const receiveMs = performance.now() - start;
let oldOutcome: string;
const oldMs = ms(() => {
  try {
    const parsed = JSON.parse(rawBody.toString('utf8')) as { events: unknown[] };
    for (const event of parsed.events) JSON.stringify({ v: 1, event });
    oldOutcome = 'all queued';
  } catch (error) {
    oldOutcome = `${(error as Error).name}: ${(error as Error).message} → 500, nothing queued, redelivered for ever`;
  }
});
console.log(
  `\n2. a signed delivery of 10 events, one nested ${depth.toLocaleString('en')} levels deep (${rawBody.length.toLocaleString('en')} bytes)`,
);
console.log(`   old path (JSON.stringify per event): ${fmt(oldMs)} ms, ${oldOutcome!}`);
console.log(
  `   receiver now: ${fmt(receiveMs)} ms, ${result.accepted} queued, ${result.setAside.length} set aside (${result.setAside[0]?.reason ?? '-'})`,
);
