/**
 * The SES v2 stand-in in a process of its own, for bench/email: the bench's broker and baselines
 * are measured without the stand-in's CPU. Started with its account's rate; answers IPC:
 * - `{ kind: 'stats' }` → `{ perSecond, accepted, seconds }`: recipients accepted in each whole
 *   second from the first accepted email, in all, and the seconds from the first to the last;
 * - `{ kind: 'rate', maxSendRate }` → `{ ok: true }`: a new rate (and an empty record).
 *
 *   node bench/lib/ses-stand-in.ts '{"maxSendRate":200}'
 */
import { startSesEmulator } from '#local/ses-emulator.ts';

const { maxSendRate } = JSON.parse(process.argv[2] ?? '{}') as { maxSendRate: number };
const ses = await startSesEmulator({
  account: { maxSendRate, max24HourSend: -1 },
  // The bench counts what SES accepted; nobody listens to the events.
  configurationSets: { bench: { eventTypes: [] } },
});
let from = 0;

process.on('message', (message: { kind: string; since?: number; maxSendRate?: number }) => {
  if (message.kind === 'rate') {
    ses.account.set({ maxSendRate: message.maxSendRate! });
    from = ses.sent().length;
    process.send!({ ok: true });
    return;
  }
  const sent = ses.sent().slice(from);
  // From the first email accepted: the time a broker takes to pick the client up is not sending.
  const since = sent[0]?.at ?? 0;
  const perSecond: number[] = [];
  for (const email of sent) {
    const second = Math.floor((email.at - since) / 1000);
    if (second >= 0) perSecond[second] = (perSecond[second] ?? 0) + email.to.length;
  }
  const last = sent.at(-1)?.at ?? since;
  process.send!({
    perSecond: Array.from(perSecond, (n) => n ?? 0),
    accepted: sent.reduce((sum, email) => sum + email.to.length, 0),
    seconds: (last - since) / 1000,
  });
});
process.on('disconnect', () => void ses.close().then(() => process.exit(0)));
process.send!({ url: ses.url });
