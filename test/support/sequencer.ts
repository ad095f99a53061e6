/**
 * Runs the test files longest first, across projects. Vitest's own sequencer runs one project
 * after another (e2e, infra, integration, unit, by name), so a two-minute integration file could
 * start only after every e2e file, and two cores sat half idle at the end of `npm test`.
 *
 * A file's expected time is its duration from vitest's results cache when there is one, else the
 * figure below (seconds, measured on a 2-core machine running the whole suite), else a second.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const EXPECTED_SECONDS: Readonly<Record<string, number>> = {
  'test/e2e/message-campaign.test.ts': 120,
  'test/e2e/fleet-drills.test.ts': 180,
  'test/integration/broker/broker.test.ts': 95,
  'test/e2e/npm-start.test.ts': 55,
  'test/integration/broker/message-jobs.test.ts': 55,
  'test/e2e/webhooks-under-faults.test.ts': 36,
  'test/infra/stack.test.ts': 20,
  'test/infra/webhooks.test.ts': 20,
  'test/integration/webhooks/channel-cli.test.ts': 16,
  'test/infra/jobs.test.ts': 16,
  'test/infra/broker-fleet.test.ts': 10,
  'test/integration/jobs/jobs-cancel.test.ts': 8,
  'test/e2e/jobs-continuations.test.ts': 6,
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
