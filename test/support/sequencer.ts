/**
 * Runs the test files longest first, across projects. Vitest's own sequencer runs one project
 * after another (e2e, infra, integration, unit, by name), so a two-minute integration file could
 * start only after every e2e file, and two cores sat half idle at the end of `npm test`.
 *
 * A file's expected time is its duration from vitest's results cache when there is one, else the
 * figure below (seconds, measured on a 2-core machine running the whole suite: a fresh clone has no
 * cache, and a long file left out of this list starts last and makes the run's tail), else a second.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const EXPECTED_SECONDS: Readonly<Record<string, number>> = {
  'test/e2e/fleet-drills.test.ts': 644,
  'test/e2e/retries-by-outcome.test.ts': 288,
  'test/integration/broker/message-jobs.test.ts': 252,
  'test/e2e/npm-start.test.ts': 252,
  'test/integration/email/email-drill.test.ts': 171,
  'test/e2e/message-campaign.test.ts': 137,
  'test/integration/broker/broker.test.ts': 129,
  'test/e2e/contact-time.test.ts': 126,
  'test/e2e/any-day.test.ts': 98,
  'test/e2e/webhooks-under-faults.test.ts': 97,
  'test/e2e/job-series.test.ts': 91,
  'test/integration/email/email-jobs.test.ts': 90,
  'test/browser/console-faithful.test.ts': 83,
  'test/browser/console.test.ts': 80,
  'test/e2e/ops-cli.test.ts': 66,
  'test/integration/broker/message-quota.test.ts': 65,
  'test/integration/webhooks/channel-cli.test.ts': 53,
  'test/infra/webhooks.test.ts': 46,
  'test/e2e/connect-opt-out.test.ts': 45,
  'test/integration/local-cloud/dynamo-start.test.ts': 41,
  'test/e2e/outcome-webhooks.test.ts': 41,
  'test/e2e/fuzz-public-routes.test.ts': 41,
  'test/e2e/authorization-matrix.test.ts': 35,
  'test/e2e/channels-api.test.ts': 28,
  'test/e2e/unsubscribe.test.ts': 27,
  'test/infra/deployable.test.ts': 22,
  'test/integration/fleet/job-manager.test.ts': 20,
  'test/unit/pacing/calling-hours.test.ts': 18,
  'test/integration/jobs/jobs-cancel.test.ts': 17,
  'test/integration/email/email-events.test.ts': 16,
  'test/integration/broker/chunk-claims.test.ts': 15,
  'test/integration/webhooks/webhook-stores.test.ts': 14,
  'test/integration/jobs/job-end.test.ts': 14,
  'test/infra/twilio.test.ts': 14,
  'test/integration/jobs/jobs-flow.test.ts': 13,
  'test/integration/local-cloud/sqs-poller.test.ts': 11,
  'test/integration/broker/contact-caps.test.ts': 11,
  'test/infra/stack.test.ts': 10,
  'test/infra/jobs.test.ts': 10,
  'test/infra/broker-fleet.test.ts': 10,
  'test/e2e/jobs-continuations.test.ts': 10,
};

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const expected = (spec: TestSpecification): number => {
      const cached = this.ctx.cache.getTestSpecificationResult(spec);
      if (cached && !cached.failed) return cached.duration / 1000;
      const relative = spec.moduleId.slice(root.length + 1).replaceAll('\\', '/');
      return EXPECTED_SECONDS[relative] ?? 1;
    };
    return [...files].sort((a, b) => expected(b) - expected(a));
  }
}
