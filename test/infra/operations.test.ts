/**
 * Operating the stack: one dashboard whose panels read the metrics the code publishes (by the
 * names and services it publishes them under), and the alarms an operator must act on, each
 * notifying the stack's alarm topic.
 */
import { describe, expect, it } from 'vitest';
import { synthesizer } from '../support/synth.ts';

const synthesize = synthesizer('operations', { stage: 'dev', telephonyApiUrl: 'https://api.telephony.test' });
const { template } = synthesize({});

/** The dashboard body with CloudFormation's joins flattened (tokens kept as their JSON). */
function dashboardBody(): string {
  const dashboards = Object.values(template.findResources('AWS::CloudWatch::Dashboard'));
  expect(dashboards).toHaveLength(1);
  const body = dashboards[0]!.Properties.DashboardBody as { 'Fn::Join': [string, unknown[]] };
  return body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : JSON.stringify(part))).join('');
}

/** Each metric as published: the service that publishes it and its name. */
const PUBLISHED = {
  broker: [
    'CallsInFlight',
    'CallLimit',
    'CallStarts',
    'CallRateLimit',
    'MessagesSent',
    'LineRateLimited',
    'LineQuotaUsedPercent',
    'LeasesLost',
    'ProtectionFailures',
  ],
  'call-status': ['CallsAnswered', 'CallsEnded'],
  'connect-events': ['CallsAnswered', 'CallsEnded'],
  'webhook-receiver': ['WebhookAckLatency', 'WebhookEventsAccepted'],
  'webhook-processor': ['Done', 'Retried', 'RateLimited', 'Failed'],
  ingest: ['IngestRowsPerSecond', 'IngestRows'],
  'job-manager': ['JobManagerRunTime', 'JobManagerLag'],
} as const;

describe('the operations dashboard', () => {
  const body = dashboardBody();

  it.each(
    Object.entries(PUBLISHED).flatMap(([service, names]) => names.map((name) => [service, name] as const)),
  )('shows %s %s', (service, name) => {
    const asSearch =
      body.includes(`MetricName=\\\\"${name}\\\\"`) || body.includes(`MetricName=\\"${name}\\"`);
    const asMetric = body.includes(`"Switchboard","${name}","service","${service}"`);
    expect(asSearch || asMetric, `${service} ${name}`).toBe(true);
  });

  it('searches per-client and per-channel series at one-second resolution where a second matters', () => {
    expect(body).toContain('{Switchboard,clientId,service}');
    expect(body).toContain('{Switchboard,channelId,clientId,service}');
    expect(body).toMatch(/CallStarts.*'Sum', 1\)/);
  });

  it('shows the dead-letter queues and the broker fleet', () => {
    expect(body).toContain('ApproximateNumberOfMessagesVisible');
    expect(body).toContain('RunningTaskCount');
  });
});

describe('the alarms an operator acts on', () => {
  const alarms = template.findResources('AWS::CloudWatch::Alarm');
  const byName = new Map(
    Object.values(alarms).map((a) => [
      String(a.Properties.AlarmName),
      a.Properties as Record<string, unknown>,
    ]),
  );
  const [topicId] = Object.keys(template.findResources('AWS::SNS::Topic'));

  it.each([
    'webhook-dlq-messages',
    'ingest-dlq-messages',
    'lease-churn',
    'job-manager-not-running',
    'broker-protection-failures',
    'line-quota-nearly-used',
    'webhook-ack-slow',
    'webhook-receiver-cold-start-slow',
  ])('%s notifies the alarm topic', (suffix) => {
    const name = [...byName.keys()].find((n) => n.endsWith(suffix));
    expect(name, suffix).toBeDefined();
    expect(JSON.stringify(byName.get(name!)!.AlarmActions)).toContain(topicId!);
  });

  it('watches the roll-up the code publishes (service only: an alarm cannot search)', () => {
    const quota = [...byName.entries()].find(([n]) => n.endsWith('line-quota-nearly-used'))![1];
    expect(quota).toMatchObject({
      Namespace: 'Switchboard',
      MetricName: 'LineQuotaUsedPercent',
      Dimensions: [{ Name: 'service', Value: 'broker' }],
      Threshold: 90,
    });
  });
});

describe("cold starts: every function's Init Duration, from its reports", () => {
  const functions = Object.values(template.findResources('AWS::Lambda::Function')).filter((f) =>
    String(f.Properties.Description ?? '').startsWith('Switchboard '),
  );
  const filters = Object.values(template.findResources('AWS::Logs::MetricFilter')).map(
    (f) => f.Properties as Record<string, unknown>,
  );
  const initFilters = filters.filter((f) => String(f.FilterPattern).includes('initDurationMs'));

  it('logs in JSON, so the report is a platform.report record', () => {
    expect(functions.length).toBeGreaterThan(10);
    for (const fn of functions) expect(fn.Properties.LoggingConfig).toMatchObject({ LogFormat: 'JSON' });
  });

  it('has one metric filter per function, reading initDurationMs of platform.report records', () => {
    expect(initFilters).toHaveLength(functions.length);
    for (const f of initFilters) {
      expect(f.FilterPattern).toBe(
        '{ ($.type = "platform.report") && ($.record.metrics.initDurationMs > 0) }',
      );
      expect(f.MetricTransformations).toEqual([
        expect.objectContaining({
          MetricNamespace: 'Switchboard/Lambda',
          MetricName: expect.stringMatching(/^InitDuration-/),
          MetricValue: '$.record.metrics.initDurationMs',
          Unit: 'Milliseconds',
        }),
      ]);
    }
    const names = initFilters.map(
      (f) => (f.MetricTransformations as { MetricName: string }[])[0]!.MetricName,
    );
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain('InitDuration-webhook-receiver');
  });

  it("shows each on the dashboard, and alarms on the receiver's p99", () => {
    const body = dashboardBody();
    for (const f of initFilters) {
      expect(body).toContain((f.MetricTransformations as { MetricName: string }[])[0]!.MetricName);
    }
    const alarm = Object.values(template.findResources('AWS::CloudWatch::Alarm'))
      .map((a) => a.Properties as Record<string, unknown>)
      .find((a) => String(a.AlarmName).endsWith('webhook-receiver-cold-start-slow'))!;
    expect(alarm).toMatchObject({
      Namespace: 'Switchboard/Lambda',
      MetricName: 'InitDuration-webhook-receiver',
      ExtendedStatistic: 'p99',
      Threshold: 1_000,
    });
  });
});
