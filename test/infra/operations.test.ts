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
