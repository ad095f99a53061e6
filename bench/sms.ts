/**
 * bench:sms — texts through the End User Messaging SMS stand-in (real `PinpointSMSVoiceV2Client`,
 * the identity's rate counted in message parts a second, MPS) by Switchboard's SMS transport
 * (`shared/adapters/sms-transport.ts`: each text takes its parts from the identity's shared rate,
 * `SharedRate`, before it goes), side by side in one run with a baseline that paces texts a second
 * at the MPS figure, as a sender that counts messages rather than parts would. Each runs an ASCII
 * campaign (1 GSM part a text) and a Japanese one (3 UCS-2 parts a text).
 *
 * Printed per contender and text: parts a second (goal: the MPS held, the slowest 2 whole seconds ≥
 * 97 % of it, 0 throttled), texts a second, ThrottlingExceptions, and the ratio to the baseline.
 *
 *   npm run bench:sms -- [--mps 40] [--texts 240] [--senders 8]
 */
import { parseArgs } from 'node:util';
import { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { LOCAL_SMS, type SmsEmulator, startSmsEmulator } from '#local/sms-emulator.ts';
import { SMS_CLIENT_CONFIG, SmsTransport, smsRateBurst } from '#shared/adapters/sms-transport.ts';
import { pushUnit } from '#shared/campaign/send-queue.ts';
import { systemClock, systemTimers } from '#shared/pacing/clock.ts';
import { SharedRate } from '#shared/pacing/shared-rate.ts';
import { TokenBucket } from '#shared/pacing/token-bucket.ts';
import { messageParts } from '#shared/sms/parts.ts';
import type { SmsTemplate } from '#shared/sms/template.ts';

const { values } = parseArgs({
  options: {
    mps: { type: 'string', default: '40' },
    texts: { type: 'string', default: '240' },
    senders: { type: 'string', default: '8' },
  },
});
const MPS = Number(values.mps);
const TEXTS = Number(values.texts);
const SENDERS = Number(values.senders);

const TEXTS_BY_KIND: Readonly<Record<string, SmsTemplate>> = {
  ascii: { body: 'Hi {{name}}, your table for 2 is booked tomorrow at 19:00. Reply STOP to opt out.' },
  japanese: { body: `{{name}}様 ${'明日19時、2名様のご予約を承りました。'.repeat(7)}` },
};

interface Row {
  readonly contender: string;
  readonly kind: string;
  readonly partsPerText: number;
  readonly seconds: number;
  readonly partsPerSecond: number;
  readonly slowestSecond: number | undefined;
  /** The fewest parts in any 2 whole seconds inside the run, a second's worth: see `slowestWindow`. */
  readonly slowestWindow: number | undefined;
  readonly throttled: number;
  readonly texts: number;
}

/** Sends `TEXTS` texts of `kind` from `SENDERS` concurrent senders; `pace` before each one. */
async function campaign(
  emulator: SmsEmulator,
  contender: string,
  kind: string,
  pace: (parts: number) => Promise<void> | undefined,
): Promise<Row> {
  const client = new PinpointSMSVoiceV2Client({
    region: LOCAL_SMS.region,
    endpoint: emulator.url,
    credentials: { accessKeyId: LOCAL_SMS.accessKeyId, secretAccessKey: LOCAL_SMS.secretAccessKey },
    ...SMS_CLIENT_CONFIG,
  });
  const transport = new SmsTransport({
    sms: client,
    clientId: 'bench',
    settings: { originationIdentity: LOCAL_SMS.originationNumber },
    defaultConfigurationSet: LOCAL_SMS.configurationSet,
    partsPerSecond: MPS,
    sharedParts: { take: async (parts) => pace(parts) },
  });
  const before = emulator.sent().length;
  let next = 0;
  let throttled = 0;
  const started = Date.now();
  const sender = async () => {
    for (let i = next++; i < TEXTS; i = next++) {
      const unit = pushUnit({
        jobId: 'bench',
        taskId: `t${i}`,
        recipient: `+8190${String(10_000_000 + i).slice(-8)}`,
        variables: { name: kind === 'ascii' ? `Guest ${i}` : `顧客${i}` },
        template: TEXTS_BY_KIND[kind]!,
        attempt: 1,
        attemptStartedAt: started,
      });
      const prepared = transport.prepare(unit);
      for (;;) {
        await transport.ready(prepared);
        const outcome = await transport.send(prepared);
        if (outcome.kind !== 'rate-limited') break;
        throttled++;
        await new Promise((r) => setTimeout(r, 1_000 / MPS));
      }
    }
  };
  await Promise.all(Array.from({ length: SENDERS }, sender));
  const seconds = (Date.now() - started) / 1000;
  client.destroy();
  const sent = emulator.sent().slice(before);
  const parts = sent.reduce((sum, t) => sum + t.parts, 0);
  return {
    contender,
    kind,
    partsPerText: messageParts(sent[0]!.body).parts,
    seconds,
    partsPerSecond: parts / seconds,
    slowestSecond: slowestWindow(sent, 1),
    slowestWindow: slowestWindow(sent, 2),
    throttled,
    texts: sent.length,
  };
}

/**
 * The fewest parts accepted in any `seconds` consecutive whole seconds strictly inside the run, per
 * second. A text's parts are counted at one instant, so one whole second holds whole texts only (a
 * 3-part text at 40 MPS makes seconds of 39 or 42); two seconds even that out.
 */
function slowestWindow(texts: readonly { at: number; parts: number }[], seconds: number): number | undefined {
  if (texts.length === 0) return undefined;
  const first = Math.min(...texts.map((t) => t.at));
  const bySecond = new Map<number, number>();
  for (const t of texts) {
    const second = Math.floor((t.at - first) / 1000);
    bySecond.set(second, (bySecond.get(second) ?? 0) + t.parts);
  }
  const last = Math.max(...bySecond.keys());
  if (last < seconds + 1) return undefined;
  let slowest = Number.POSITIVE_INFINITY;
  for (let s = 1; s + seconds - 1 < last; s++) {
    let parts = 0;
    for (let k = 0; k < seconds; k++) parts += bySecond.get(s + k) ?? 0;
    slowest = Math.min(slowest, parts / seconds);
  }
  return slowest;
}

/** Lets the identity's bucket fill again (a second's worth) before the next campaign. */
const refill = () => new Promise((r) => setTimeout(r, 1_500));

/** Switchboard: the identity's shared rate, in parts, with a text's worth of burst (`smsRateBurst`). */
function partsRate(): (parts: number) => Promise<void> {
  const rate = new SharedRate({
    perSecond: MPS,
    burst: smsRateBurst(MPS),
    clock: systemClock,
    timers: systemTimers,
  });
  return (parts) => rate.take(parts);
}

/** The baseline: MPS texts a second, whatever their parts. */
function textsRate(): (parts: number) => Promise<void> {
  const bucket = new TokenBucket({ ratePerSecond: MPS, burst: 1 });
  return async () => {
    while (!bucket.tryTake(Date.now(), 1)) {
      await new Promise((r) => setTimeout(r, Math.max(1, bucket.msUntilNextToken(Date.now()))));
    }
  };
}

const fmt = (n: number | undefined, digits = 1) =>
  n === undefined
    ? '—'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main() {
  const emulator = await startSmsEmulator({
    identities: [{ kind: 'phone-number', phoneNumber: LOCAL_SMS.originationNumber, mps: MPS }],
    deliver: async () => {},
  });
  console.log(
    `bench:sms — ${TEXTS} texts a campaign, ${SENDERS} concurrent senders, the identity at ${MPS} MPS (message parts a second) in the End User Messaging SMS stand-in, through the real PinpointSMSVoiceV2Client`,
  );
  const rows: Row[] = [];
  try {
    for (const kind of Object.keys(TEXTS_BY_KIND)) {
      rows.push(await campaign(emulator, 'switchboard', kind, partsRate()));
      await refill();
      rows.push(await campaign(emulator, 'baseline: texts/s', kind, textsRate()));
      await refill();
    }
  } finally {
    await emulator.close();
  }
  console.log(
    '\ncontender          text      parts/text  seconds  parts/s  slowest 1 s  slowest 2 s  throttled  texts/s',
  );
  for (const r of rows) {
    console.log(
      `${r.contender.padEnd(18)} ${r.kind.padEnd(9)} ${String(r.partsPerText).padStart(10)} ${fmt(r.seconds).padStart(8)} ${fmt(r.partsPerSecond).padStart(8)} ${fmt(r.slowestSecond, 0).padStart(12)} ${fmt(r.slowestWindow).padStart(12)} ${String(r.throttled).padStart(10)} ${fmt(r.texts / r.seconds).padStart(8)}`,
    );
  }
  console.log('\ngoals (issue 39: parts per second held, Japanese vs ASCII):');
  for (const kind of Object.keys(TEXTS_BY_KIND)) {
    const ours = rows.find((r) => r.contender === 'switchboard' && r.kind === kind)!;
    const base = rows.find((r) => r.contender !== 'switchboard' && r.kind === kind)!;
    const held = ours.slowestWindow !== undefined && ours.slowestWindow >= 0.97 * MPS;
    console.log(
      `  ${held && ours.throttled === 0 ? 'PASS' : 'FAIL'}  ${kind} (${ours.partsPerText} part${ours.partsPerText > 1 ? 's' : ''} a text): slowest 2 whole seconds ${fmt(ours.slowestWindow)} parts/s of ${MPS} (≥ 97 %), ${ours.throttled} throttled; the baseline ${base.throttled} throttled, ${fmt(base.texts / base.seconds)} texts/s against our ${fmt(ours.texts / ours.seconds)} (×${fmt(base.texts / base.seconds / (ours.texts / ours.seconds), 2)}, its texts a second counted as if each were one part)`,
    );
  }
}

await main();
