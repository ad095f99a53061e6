/**
 * `npm test`: typecheck, lint, `cdk synth`, then every vitest project (unit, integration, e2e, infra), and a
 * closing `N passed, N failed` line. Typecheck, lint and synth count as one check each.
 *
 * The three checks run beside vitest, not before it: vitest's first minute is mostly waiting (Java
 * starting, brokers spawning), and on two cores the checks fill that time instead of adding to it.
 * Their output is printed whole once each ends, so it never interleaves with vitest's.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

interface Step {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
}

const steps: Step[] = [
  { name: 'typecheck', command: 'tsc', args: ['-p', 'tsconfig.json'] },
  { name: 'typecheck console', command: 'tsc', args: ['-p', 'console/tsconfig.json'] },
  { name: 'lint', command: 'biome', args: ['check', '.'] },
  // The CLI path a user deploys with: `cdk synth` offline, no credentials, no Docker.
  { name: 'synth', command: 'cdk', args: ['synth', '--quiet', '--no-notices'] },
];

/** Runs a step with its output kept; resolves with whether it passed, after printing its output. */
function runStep(step: Step): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(step.command, step.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const output: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
    const finish = (ok: boolean, extra = '') => {
      process.stdout.write(`\n== ${step.name} ==\n${Buffer.concat(output).toString()}${extra}`);
      console.log(`${step.name}: ${ok ? 'ok' : 'FAILED'}`);
      resolve(ok);
    };
    child.on('error', (error) => finish(false, `${error.message}\n`));
    child.on('close', (code) => finish(code === 0));
  });
}

/** Runs after vitest and synth: it reads what both produced. */
const IAM_CONFORMANCE: Step = {
  name: 'iam-conformance',
  command: 'node',
  args: ['local/iam/conformance.ts', '--template', 'cdk.out/Switchboard-local.template.json'],
};

let passed = 0;
let failed = 0;
let skipped = 0;
/** What failed, one line each, repeated just above the last line (CI keeps only the output's tail). */
const failures: string[] = [];

const checks = Promise.all(steps.map(runStep));

console.log('\n== vitest (unit, integration, e2e, infra, browser) ==');
mkdirSync('.test-results', { recursive: true });
const jsonFile = '.test-results/vitest.json';
rmSync(jsonFile, { force: true });
rmSync('.test-results/aws-calls', { recursive: true, force: true });
const vitestStatus = await new Promise<number | null>((resolve) => {
  const child = spawn(
    'vitest',
    [
      'run',
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${jsonFile}`,
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
  child.on('error', () => resolve(1));
  child.on('close', (code) => resolve(code));
});
if (existsSync(jsonFile)) {
  const report = JSON.parse(readFileSync(jsonFile, 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numTodoTests: number;
    testResults: VitestFile[];
  };
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  // A file that failed to load (syntax error, failing hook) has no test results of its own.
  failed += report.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0).length;
  if (vitestStatus !== 0 && report.numFailedTests === 0) {
    failed++;
    failures.push(`vitest: exited ${vitestStatus} with no failed test (an unhandled error? see above)`);
  }
  failures.push(...failedTestsOf(report.testResults));
} else {
  failed++;
  failures.push('vitest: no report written');
}

const results = await checks;
results.forEach((ok, i) => {
  if (ok) passed++;
  else {
    failed++;
    failures.push(`${steps[i]!.name}: failed`);
  }
});

// Every AWS call the integration and e2e suites recorded, against the synthesized roles; only on a
// whole run (`npm test -- some/file` records too little to judge).
if (process.argv.length <= 2) {
  if (await runStep(IAM_CONFORMANCE)) passed++;
  else {
    failed++;
    failures.push(`${IAM_CONFORMANCE.name}: failed`);
  }
}

if (skipped) console.log(`\n${skipped} skipped`);
if (failures.length) console.log(`\nFailed:\n${failures.map((f) => `  ${f}`).join('\n')}`);
// The last line, exactly `N passed, N failed`: CI reads it.
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);

/** A file's entry in vitest's JSON report (the part read here). */
interface VitestFile {
  name: string;
  status: string;
  message?: string;
  assertionResults: { status: string; fullName: string; failureMessages?: string[] }[];
}

/** Each failed test as `file > name: first line of its error`; a file that failed to load by its message. */
function failedTestsOf(files: VitestFile[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    const where = path.relative(process.cwd(), file.name);
    const failedTests = file.assertionResults.filter((t) => t.status === 'failed');
    if (file.status === 'failed' && failedTests.length === 0) {
      out.push(`${where}: ${firstLine(file.message) || 'failed to load'}`);
    }
    for (const t of failedTests) out.push(`${where} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`);
  }
  return out;
}

function firstLine(text: string | undefined): string {
  return (text ?? '').split('\n', 1)[0]!.slice(0, 300);
}
