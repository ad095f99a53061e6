/**
 * The IAM conformance check (`npm run test:iam`; `npm test` runs it after the suites): every AWS
 * call the integration and e2e suites recorded (`./recorder.ts`), evaluated against the role
 * policies of the synthesized template (`./policy.ts`). Fails on any call AWS would deny and on a
 * principal the template does not know; lists the permissions no recorded call used.
 *
 *   node local/iam/conformance.ts [--template cdk.out/Switchboard-local.template.json] [--calls .test-results/aws-calls]
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type CfnTemplate, type ConformanceReport, checkConformance } from './policy.ts';
import type { RecordedCall } from './recorder.ts';

/** Reads every `*.jsonl` record of a directory. */
export function readRecordedCalls(dir: string): RecordedCall[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) =>
      readFileSync(path.join(dir, f), 'utf8')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as RecordedCall),
    );
}

/** The report as lines for a terminal. */
export function formatReport(report: ConformanceReport, calls: number): string[] {
  const lines = [`${calls} recorded call shapes, ${report.checked} authorization requests evaluated`];
  for (const { call, request, reason } of report.denied) {
    const context = Object.keys(request.context).length ? ` ${JSON.stringify(request.context)}` : '';
    lines.push(
      `DENIED  ${call.principal}: ${request.action} on ${request.resource}${context} (via ${call.via}): ${reason}`,
    );
  }
  for (const principal of report.unknownPrincipals) {
    lines.push(`UNKNOWN ${principal}: calls were recorded for a principal the template has no role for`);
  }
  for (const [principal, pairs] of report.unused) {
    lines.push(`unused  ${principal}: ${pairs.length} permission(s) no recorded call used:`);
    for (const pair of pairs) lines.push(`          ${pair}`);
  }
  return lines;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      template: { type: 'string', default: 'cdk.out/Switchboard-local.template.json' },
      calls: { type: 'string', default: '.test-results/aws-calls' },
    },
  });
  if (!existsSync(values.template)) {
    console.error(`no template at ${values.template}: run \`npm run synth\` first`);
    process.exit(1);
  }
  const calls = readRecordedCalls(values.calls);
  if (calls.length === 0) {
    console.error(`no recorded AWS calls in ${values.calls}: run the integration and e2e suites first`);
    process.exit(1);
  }
  const template = JSON.parse(readFileSync(values.template, 'utf8')) as CfnTemplate;
  const report = checkConformance(template, calls);
  for (const line of formatReport(report, calls.length)) console.log(line);
  const failed = report.denied.length + report.unknownPrincipals.length;
  console.log(
    failed === 0
      ? 'IAM conformance: every recorded call is allowed'
      : `IAM conformance: ${failed} problem(s)`,
  );
  process.exit(failed === 0 ? 0 : 1);
}
