/**
 * The Logger port on Powertools: JSON lines with the service and each line's keys, metrics as
 * Embedded Metric Format records CloudWatch accepts (dimension sets, units, one-second
 * resolution), and the broker's per-second figures per client and channel.
 */
import { describe, expect, it } from 'vitest';
import { isMetricRecord } from '#local/metric-records.ts';
import { PowertoolsLog } from '#shared/adapters/powertools.ts';
import { BrokerMetrics, callEndedMetrics } from '#shared/broker/broker-metrics.ts';

function capture() {
  const lines: string[] = [];
  const log = new PowertoolsLog('broker', { write: (line) => lines.push(line), level: 'debug' });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const emf = () =>
    records().filter((r) => r._aws) as {
      _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: object[] }[] };
      [k: string]: unknown;
    }[];
  return { log, records, emf, lines };
}

describe('the Powertools logger', () => {
  it('writes one JSON line with level, service, message and fields; keys carry to every line', () => {
    const { log, records } = capture();
    const keyed = log.withKeys({ clientId: 'c1', jobId: 'j1' });
    keyed.info('call placed', { taskId: 't1', attempt: 2 });
    keyed.withKeys({ taskId: 't2' }).warn('call failed', { error: new Error('boom') });
    const [placed, failed] = records();
    expect(placed).toMatchObject({
      level: 'INFO',
      service: 'broker',
      message: 'call placed',
      clientId: 'c1',
      jobId: 'j1',
      taskId: 't1',
      attempt: 2,
    });
    expect(failed).toMatchObject({ level: 'WARN', clientId: 'c1', taskId: 't2', error: { message: 'boom' } });
  });

  it('leaves out lines below its level', () => {
    const lines: string[] = [];
    const log = new PowertoolsLog('x', { level: 'warn', write: (l) => lines.push(l) });
    log.info('quiet');
    log.warn('loud');
    expect(lines).toHaveLength(1);
  });

  it('publishes metrics as one EMF record, with a roll-up dimension set and high resolution on request', () => {
    const { log, emf } = capture();
    log.metrics(
      { WebhookAckLatency: 42 },
      { channelId: 'ch1' },
      { unit: 'Milliseconds', highResolution: true, gauge: true, rollUp: true },
    );
    const [record] = emf();
    const directive = record!._aws.CloudWatchMetrics[0]!;
    expect(directive.Namespace).toBe('Switchboard');
    expect(directive.Dimensions).toEqual([['service', 'channelId'], ['service']]);
    expect(directive.Metrics).toEqual([
      { Name: 'WebhookAckLatency', Unit: 'Milliseconds', StorageResolution: 1 },
    ]);
    expect(record).toMatchObject({ service: 'broker', channelId: 'ch1', WebhookAckLatency: 42 });
  });

  it('leaves out counts of zero, and everything when all are zero; keeps a gauge at zero', () => {
    const { log, emf } = capture();
    log.metrics({ Done: 0, Failed: 2 });
    log.metrics({ Done: 0 });
    log.metrics({ CallsInFlight: 0 }, { clientId: 'c1' }, { gauge: true });
    const [counts, gauge] = emf();
    expect(counts).not.toHaveProperty('Done');
    expect(counts).toMatchObject({ Failed: 2 });
    expect(gauge).toMatchObject({ CallsInFlight: 0, clientId: 'c1' });
    expect(emf()).toHaveLength(2);
  });
});

describe("the broker's metrics", () => {
  it('publishes each client second: peak in flight against the limit, starts, messages and 429s per channel', () => {
    const { log, emf } = capture();
    const metrics = new BrokerMetrics(log);
    const c1 = metrics.forClient('c1');
    c1.limits({ maxConcurrentCalls: 5, callsPerSecond: 2 });
    for (const n of [1, 2, 3, 2]) c1.inFlight(n);
    c1.callStarted();
    c1.callStarted();
    c1.sent('ch1', { endpoint: 'multicast', recipients: 300, outcome: 'delivered', latencyMs: 5 });
    c1.sent('ch1', { endpoint: 'push', recipients: 1, outcome: 'rate-limited', latencyMs: 5 });
    metrics.flush();
    const [calls, starts, messages] = emf();
    expect(calls).toMatchObject({ clientId: 'c1', CallsInFlight: 3, CallLimit: 5, CallRateLimit: 2 });
    expect(starts).toMatchObject({ clientId: 'c1', CallStarts: 2 });
    expect(messages).toMatchObject({
      clientId: 'c1',
      channelId: 'ch1',
      MessagesSent: 300,
      LineRateLimited: 1,
    });
    // The next second starts from what is in flight now, and counts from zero.
    metrics.flush();
    expect(emf().slice(3)).toEqual([expect.objectContaining({ CallsInFlight: 2 })]);
    metrics.released('c1');
    const before = emf().length;
    metrics.flush();
    expect(emf().length).toBe(before + 0);
  });

  it('counts only leases lost without a release; reads the quota as a percent of a limit', () => {
    const { log, emf } = capture();
    const metrics = new BrokerMetrics(log);
    metrics.leaseLost('c1', 'released');
    metrics.leaseLost('c1', 'expired');
    metrics.quota('ch1', { used: 5 });
    metrics.quota('ch1', { limit: 1000, used: 912 });
    expect(emf()).toEqual([
      expect.objectContaining({ LeasesLost: 1, clientId: 'c1' }),
      expect.objectContaining({ LineQuotaUsedPercent: 91.2, channelId: 'ch1' }),
    ]);
  });

  it('counts an ended call, and an answered one, for the answer rate', () => {
    const { log, emf } = capture();
    const ended = callEndedMetrics(log);
    ended({ clientId: 'c1', status: 'completed' });
    ended({ clientId: 'c1', status: 'no-answer' });
    expect(emf().map((r) => [r.CallsEnded, r.CallsAnswered])).toEqual([
      [1, 1],
      [1, undefined],
    ]);
  });
});

describe('npm start keeps metric records out of its output', () => {
  it("tells the broker's EMF records from its log lines", () => {
    const { log, lines } = capture();
    const metrics = new BrokerMetrics(log);
    metrics.forClient('c1').callStarted();
    metrics.flush();
    log.info('message round done', { clientId: 'c1', note: '"CloudWatchMetrics" in a field' });
    const [record, logLine] = lines;
    expect(isMetricRecord(record!)).toBe(true);
    expect(isMetricRecord(logLine!)).toBe(false);
    expect(isMetricRecord('{"_aws": {"CloudWatchMetrics": "not a list"}}')).toBe(false);
    expect(isMetricRecord('{"CloudWatchMetrics" cut')).toBe(false);
    expect(isMetricRecord('broker ready')).toBe(false);
  });
});
