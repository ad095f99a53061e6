import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/support/sequencer.ts';

// One runner, five projects: unit (pure logic, no emulators), integration (against the local
// cloud started once in global setup), e2e (whole flows on the local cloud) and infra (CDK synth
// + assertions + cdk-nag), browser (the console in Chromium). `npm test` runs them all; each has
// its own npm script too.
export default defineConfig({
  test: {
    pool: 'forks',
    // The tests' own SDK clients retry as the local cloud's processes do (DYNAMO_LOCAL_MAX_ATTEMPTS
    // in local/cloud.ts: DynamoDB Local's write lock times out under load; AWS's would not).
    env: { AWS_MAX_ATTEMPTS: '10' },
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Longest files first, whatever their project: the two workers finish together.
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/local-cloud-setup.ts'],
          setupFiles: ['test/support/record-aws-calls.ts'],
          // Tables without DynamoDB streams (LOCAL_STREAMS_ENV in local/cloud.ts: stream records
          // pile up in DynamoDB Local and slow every later write of the process).
          env: { AWS_MAX_ATTEMPTS: '10', LOCAL_DYNAMODB_STREAMS: 'off' },
          // Generous: these share two cores with the e2e drills; a slow machine must not fail them.
          testTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/local-cloud-setup.ts'],
          setupFiles: ['test/support/record-aws-calls.ts'],
          testTimeout: 240_000,
        },
      },
      { extends: true, test: { name: 'infra', include: ['test/infra/**/*.test.ts'], testTimeout: 180_000 } },
      // The console in headless Chromium (from @sparticuz/chromium) against its own local stack.
      {
        extends: true,
        test: { name: 'browser', include: ['test/browser/**/*.test.ts'], testTimeout: 180_000 },
      },
    ],
  },
});
