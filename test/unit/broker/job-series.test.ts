/**
 * A job's series: the broker's per-client counts become one sample per job and window (peak in
 * flight against the limit, the job's starts, messages and 429s), jobs that stop are sampled down
 * to zero and then no more, two brokers' parts of one window merge, and the recorder never lets a
 * slow or failing store reach the counting side.
 */
import { describe, expect, it } from 'vitest';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { BrokerMetrics } from '#shared/broker/broker-metrics.ts';
import {
  type JobSample,
  JobSeriesRecorder,
  JobSeriesSampler,
  mergeSamples,
} from '#shared/broker/job-series.ts';
import type { SendObservation } from '#shared/campaign/ports.ts';
import { silentLogger } from '#shared/log.ts';

const T0 = Date.UTC(2025, 5, 2, 9, 0, 0);
const settings = { windowSeconds: 10, idleWindows: 2, idleWindowsWithCalls: 4 };
const push = (jobId: string, outcome: SendObservation['outcome'], recipients = 1): SendObservation => ({
  jobId,
  endpoint: 'push',
  recipients,
  outcome,
  latencyMs: 5,
});

/** A sampler on a clock the test moves. */
function sampled() {
  const clock = { t: T0 + 500, now: () => clock.t };
  const sampler = new JobSeriesSampler('b1', clock, settings);
  return { clock, sampler, at: (ms: number) => (clock.t = T0 + ms) };
}

describe('JobSeriesSampler', () => {
  it('gives one sample per job when a window ends: peak in flight, limits, starts, sends, 429s', () => {
    const { sampler, at } = sampled();
    const client = sampler.forClient('c1');
    client.limits({ maxConcurrentCalls: 6, callsPerSecond: 2 });
    for (let i = 1; i <= 5; i++) {
      client.callStarted('jobA');
      client.inFlight(i);
    }
    client.inFlight(3);
    client.sent('ch1', push('jobB', 'delivered', 500));
    client.sent('ch1', push('jobB', 'rate-limited'));
    client.sent('ch1', push('jobB', 'rejected'));
    at(9_999);
    expect(sampler.take()).toEqual([]); // the window has not ended
    at(10_100);
    const samples = sampler.take();
    const base = { clientId: 'c1', at: T0, seconds: 10, brokerId: 'b1', peakInFlight: 5 };
    const limits = { maxConcurrentCalls: 6, callsPerSecond: 2 };
    expect(samples).toEqual([
      { ...base, ...limits, jobId: 'jobA', starts: 5, messagesSent: 0, rateLimited: 0 },
      { ...base, ...limits, jobId: 'jobB', starts: 0, messagesSent: 500, rateLimited: 1 },
    ]);
    // The next window starts from the calls still in flight, with counts at zero.
    client.callStarted('jobA');
    at(20_000);
    expect(sampler.take()[0]).toMatchObject({ jobId: 'jobA', at: T0 + 10_000, peakInFlight: 3, starts: 1 });
  });

  it('counts each start in the window it happened in, however late the flush comes', () => {
    const { sampler, at } = sampled();
    const client = sampler.forClient('c1');
    client.callStarted('jobA');
    at(10_200); // a flush ~1 s late would have put this start in the first window
    client.callStarted('jobA');
    at(12_000);
    expect(sampler.take().map((s) => [s.at - T0, s.starts])).toEqual([[0, 1]]);
    at(20_000);
    expect(sampler.take().map((s) => [s.at - T0, s.starts])).toEqual([[10_000, 1]]);
  });

  it('samples a job that stopped down to zero, then no more (longer while calls are in flight)', () => {
    const { sampler, at } = sampled();
    const client = sampler.forClient('c1');
    client.sent('ch1', push('jobM', 'delivered'));
    const jobs = (k: number) => {
      at(k * 10_000);
      return sampler.take().map((s) => `${s.jobId}:${s.messagesSent}`);
    };
    expect(jobs(1)).toEqual(['jobM:1']);
    expect(jobs(2)).toEqual(['jobM:0']);
    expect(jobs(3)).toEqual(['jobM:0']);
    expect(jobs(4)).toEqual([]); // idle for more than 2 windows: forgotten

    client.callStarted('jobC');
    client.inFlight(1);
    const calls = (k: number) => {
      at(k * 10_000);
      return sampler.take().map((s) => s.jobId);
    };
    expect([5, 6, 7, 8, 9].map(calls)).toEqual([['jobC'], ['jobC'], ['jobC'], ['jobC'], ['jobC']]);
    expect(calls(10)).toEqual([]); // idle for more than 4 windows, even with a call in flight
  });

  it('closes a released client at once, and counts nothing of it after', () => {
    const { sampler, at } = sampled();
    const client = sampler.forClient('c1');
    client.callStarted('jobA');
    at(4_000);
    sampler.released('c1');
    expect(sampler.take()).toMatchObject([{ jobId: 'jobA', at: T0, starts: 1 }]);
    client.callStarted('jobA');
    at(60_000);
    expect(sampler.take()).toEqual([]);
  });

  it('is fed by BrokerMetrics: what CloudWatch counts per client, the series counts per job', () => {
    const { sampler, at } = sampled();
    const metrics = new BrokerMetrics(new PowertoolsLog('broker', { write: () => {} }), {
      forClient: (clientId) => sampler.forClient(clientId),
      released: (clientId) => sampler.released(clientId),
    });
    const client = metrics.forClient('c1');
    client.limits({ maxConcurrentCalls: 2, callsPerSecond: 1 });
    client.callStarted('jobA');
    client.inFlight(1);
    metrics.flush();
    at(10_000);
    expect(sampler.take()).toMatchObject([
      { jobId: 'jobA', starts: 1, peakInFlight: 1, maxConcurrentCalls: 2 },
    ]);
  });
});

describe('mergeSamples', () => {
  it('adds up the parts two brokers took of one window; in flight takes the higher peak', () => {
    const part = (brokerId: string, at: number, peakInFlight: number, starts: number): JobSample => ({
      clientId: 'c1',
      jobId: 'jobA',
      at,
      seconds: 10,
      brokerId,
      peakInFlight,
      maxConcurrentCalls: 6,
      callsPerSecond: 2,
      starts,
      messagesSent: 0,
      rateLimited: 0,
    });
    const merged = mergeSamples([
      part('b1', T0, 4, 7),
      part('b1', T0 + 10_000, 5, 3),
      part('b2', T0 + 10_000, 6, 9),
    ]);
    expect(merged.map((s) => [s.at - T0, s.peakInFlight, s.starts])).toEqual([
      [0, 4, 7],
      [10_000, 6, 12],
    ]);
  });
});

describe('JobSeriesRecorder', () => {
  it('writes in the background, one at a time; a failed write is dropped, never thrown', async () => {
    const { sampler, at } = sampled();
    const written: JobSample[] = [];
    let fail = true;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const recorder = new JobSeriesRecorder({
      sampler,
      logger: silentLogger,
      store: {
        put: async (sample) => {
          await gate;
          if (fail) {
            fail = false;
            throw new Error('throttled');
          }
          written.push(sample);
        },
      },
    });
    const client = recorder.forClient('c1');
    recorder.flush();
    client.callStarted('jobA');
    client.callStarted('jobB');
    at(10_000);
    recorder.flush(); // returns at once though the store has not answered
    expect(written).toEqual([]);
    release();
    await recorder.settled();
    expect(written.map((s) => s.jobId)).toEqual(['jobB']);
    client.callStarted('jobA');
    recorder.released('c1');
    await recorder.settled();
    expect(written.map((s) => [s.jobId, s.starts])).toEqual([
      ['jobB', 1],
      ['jobA', 1],
      ['jobB', 0],
    ]);
  });
});
