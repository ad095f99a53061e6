/**
 * Vitest setup file of the integration and e2e projects: records the AWS calls every function and
 * broker makes, for the IAM conformance check that `npm test` runs after the suites
 * (`local/iam/conformance.ts`).
 */
import path from 'node:path';
import { startAwsCallLog } from '#local/iam/recorder.ts';

export const AWS_CALLS_DIR = path.resolve(import.meta.dirname, '../../.test-results/aws-calls');

startAwsCallLog({ dir: AWS_CALLS_DIR });
