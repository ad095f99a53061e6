/**
 * `npm test`: typecheck, lint, `cdk synth`, then every vitest project (unit, integration, e2e, infra), and a
 * closing `N passed, N failed` line. Typecheck, lint and synth count as one check each.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';

interface Step {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
}

const steps: Step[] = [
  { name: 'typecheck', command: 'tsc', args: ['-p', 'tsconfig.json'] },
  { name: 'lint', command: 'biome', args: ['check', '.'] },
  // The CLI path a user deploys with: `cdk synth` offline, no credentials, no Docker.
  { name: 'synth', command: 'cdk', args: ['synth', '--quiet', '--no-notices'] },
];

let passed = 0;
let failed = 0;
let skipped = 0;

for (const step of steps) {
  console.log(`\n== ${step.name} ==`);
  const result = spawnSync(step.command, step.args, { stdio: 'inherit' });
  if (result.status === 0) {
    passed++;
    console.log(`${step.name}: ok`);
  } else {
    failed++;
    console.log(`${step.name}: FAILED`);
  }
}

console.log('\n== vitest (unit, integration, e2e, infra) ==');
mkdirSync('.test-results', { recursive: true });
const jsonFile = '.test-results/vitest.json';
rmSync(jsonFile, { force: true });
const vitest = spawnSync(
  'vitest',
  ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${jsonFile}`, ...process.argv.slice(2)],
  { stdio: 'inherit' },
);
if (existsSync(jsonFile)) {
  const report = JSON.parse(readFileSync(jsonFile, 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numTodoTests: number;
    testResults: { status: string; assertionResults: unknown[] }[];
  };
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  // A file that failed to load (syntax error, failing hook) has no test results of its own.
  failed += report.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0).length;
  if (vitest.status !== 0 && report.numFailedTests === 0) failed++;
} else {
  failed++;
}

console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed === 0 ? 0 : 1);
