/**
 * SES's rate is the account's: every client a broker sends for takes from one shared rate, and the
 * brokers sending at once split the account's rate among them.
 */
import { describe, expect, it } from 'vitest';
import { type EmailSenders, SENDING_LAPSES_MS, SendRateShare } from '#shared/email/send-rate-share.ts';
import { silentLogger } from '#shared/log.ts';
import { SharedRate } from '#shared/pacing/shared-rate.ts';
import { FakeTime } from '../pacing/fake-time.ts';

/** Recipients let through in each whole second of the simulation, from its start. */
async function takenPerSecond(time: FakeTime, rate: SharedRate, clients: number, requests: number) {
  const start = time.now();
  const seconds: number[] = [];
  let done = 0;
  for (let c = 0; c < clients; c++) {
    void (async () => {
      for (let r = 0; r < requests; r++) {
        await rate.take(50);
        const s = Math.floor((time.now() - start) / 1000);
        seconds[s] = (seconds[s] ?? 0) + 50;
      }
      done++;
    })();
  }
  await time.runUntil(() => done === clients);
  return Array.from(seconds, (n) => n ?? 0);
}

class MemorySenders implements EmailSenders {
  readonly until = new Map<string, number>();
  failing = false;

  async announce(brokerId: string, until: number): Promise<void> {
    if (this.failing) throw new Error('DynamoDB unavailable');
    this.until.set(brokerId, until);
  }

  async others(brokerId: string, now: number): Promise<number> {
    if (this.failing) throw new Error('DynamoDB unavailable');
    return [...this.until].filter(([id, until]) => id !== brokerId && until > now).length;
  }
}

function broker(time: FakeTime, senders: EmailSenders, brokerId: string, account = 200) {
  const rate = new SharedRate({ perSecond: 1, burst: 1, clock: time, timers: time });
  const share = new SendRateShare({
    senders,
    brokerId,
    rate,
    accountRate: async () => account,
    burstOf: (perSecond) => Math.min(50, Math.floor(perSecond / 4)),
    clock: time,
    timers: time,
    logger: silentLogger,
  });
  return { rate, share };
}

describe('one rate for every client of a broker', () => {
  it('holds 200 recipients a second however many clients take from it', async () => {
    const time = new FakeTime();
    const rate = new SharedRate({ perSecond: 200, burst: 50, clock: time, timers: time });
    const seconds = await takenPerSecond(time, rate, 3, 20);
    // 60 requests of 50: 15 s of the rate. Every whole second at most the rate and a burst's worth.
    expect(seconds.reduce((a, b) => a + b, 0)).toBe(3_000);
    expect(seconds.length).toBeGreaterThanOrEqual(15);
    expect(Math.max(...seconds.slice(1))).toBeLessThanOrEqual(200);
  });

  it('a new rate applies to takers already waiting', async () => {
    const time = new FakeTime();
    const rate = new SharedRate({ perSecond: 1, burst: 1, clock: time, timers: time });
    const order: number[] = [];
    await rate.take(50); // at 1/s the next take waits 50 s
    void rate.take(50).then(() => order.push(time.now()));
    const t0 = time.now();
    rate.retune(100, 1);
    await time.runUntil(() => order.length === 1);
    expect(order[0]! - t0).toBeLessThanOrEqual(1_000);
  });
});

describe('the account rate split among the brokers sending email', () => {
  it('two brokers sending at once take half each; one alone takes it all again once the other lapses', async () => {
    const time = new FakeTime();
    const senders = new MemorySenders();
    const a = broker(time, senders, 'a');
    const b = broker(time, senders, 'b');
    await a.share.refresh(true);
    expect(a.rate.perSecond).toBe(200);
    await b.share.refresh(true);
    await a.share.refresh();
    expect([a.rate.perSecond, b.rate.perSecond]).toEqual([100, 100]);
    expect(a.share.brokers).toBe(2);
    // b stops sending; a keeps sending. Once b's entry lapses, a has the account's rate again.
    a.share.start();
    const keepSending = async () => {
      for (let i = 0; i < 8; i++) {
        await a.rate.take(1);
        await time.advance(5_000);
      }
    };
    await keepSending();
    expect(time.now()).toBeGreaterThan(SENDING_LAPSES_MS);
    expect(a.rate.perSecond).toBe(200);
    await a.share.stop();
  });

  it('a broker that stops gives its share back at once', async () => {
    const time = new FakeTime();
    const senders = new MemorySenders();
    const a = broker(time, senders, 'a');
    const b = broker(time, senders, 'b');
    await b.share.refresh(true);
    await a.share.refresh(true);
    expect(a.rate.perSecond).toBe(100);
    await b.rate.take(1);
    await b.share.stop();
    await a.share.refresh();
    expect(a.rate.perSecond).toBe(200);
  });

  it('a broker that cannot read the others keeps the split it last read', async () => {
    const time = new FakeTime();
    const senders = new MemorySenders();
    const a = broker(time, senders, 'a');
    const b = broker(time, senders, 'b');
    await b.share.refresh(true);
    await a.share.refresh(true);
    expect(a.rate.perSecond).toBe(100);
    senders.failing = true;
    await expect(a.share.refresh()).rejects.toThrow(/unavailable/);
    expect(a.rate.perSecond).toBe(100);
  });
});
