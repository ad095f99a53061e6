/**
 * bench/cold-start: how fast each Lambda of the synthesized stack is from cold (issue 40).
 *
 * For every Switchboard function of the template in `cdk.out` (`npm run synth` writes it), the
 * bundle CDK deployed (`asset.<hash>/index.mjs`, found through the function's `aws:asset:path`):
 *   - its size;
 *   - the time to import it in a fresh Node 24 process with the environment Lambda would give it
 *     (its variables, Lambda's own, active tracing: the X-Ray SDK loads as in AWS), median of
 *     several processes;
 *   - where a harmless first event can be given offline, the time to answer it in that process
 *     (the receiver: a real API Gateway fixture with a valid `x-line-signature`; its DynamoDB and
 *     SQS calls go to a stub on 127.0.0.1);
 * side by side with a baseline bundle of the same kind, built with esbuild in the same run with
 * CDK's options and probed in alternation with it: for the receiver a bare handler doing the HMAC and
 * one SQS `SendMessage`; for the others a bare handler building the SDK clients the bundle holds.
 * Then the issue's goals, PASS or FAIL, and each bundle's top contributors by bytes (esbuild's
 * metafile of the same entry, rebuilt: CDK writes none).
 *
 *   npm run synth && npm run bench:cold-start [-- --runs 7 --only webhook-receiver,jobs-api]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  type Analysis,
  analyse,
  buildBaseline,
  clientsBaselineSource,
  REPO_ROOT,
  sdkPackagesOf,
} from './lib/cold-start-bundles.ts';
import { median, type ProbeResult, runProbe } from './lib/cold-start-probes.ts';
import { lambdaEnvironment, type StackFunction, stackFunctions } from './lib/cold-start-stack.ts';
import { BENCH_CHANNEL, startAwsStub } from './lib/cold-start-stub.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    only: { type: 'string' },
    top: { type: 'string', default: '5' },
  },
});
const runs = Number(values.runs);
const top = Number(values.top);
const only = values.only ? new Set(values.only.split(',')) : undefined;

const KB = 1024;
const RECEIVER = 'webhook-receiver';
/** Issue 40's goals. */
const GOALS = {
  importRatio: 3,
  receiverImportRatio: 2,
  bundleKb: 600,
  receiverBundleKb: 300,
};
const REGION = 'ap-northeast-1';
/** The receiver's first event: three LINE events, signed for {@link BENCH_CHANNEL}. */
const RECEIVER_FIXTURE = path.join(REPO_ROOT, 'test/fixtures/apigw/webhook-several-events.json');

/** A function's measurements, and its baseline's. */
interface Measured {
  readonly fn: StackFunction;
  readonly analysis: Analysis;
  readonly baseline: { readonly label: string; readonly bundle: string; readonly bytes: number };
  readonly ours: readonly ProbeResult[];
  readonly theirs: readonly ProbeResult[];
  readonly expectedStatus?: number;
}

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '—';
const kb = (bytes: number) => bytes / KB;
const pad = (s: string, n: number) => s.padEnd(n);
const padStart = (s: string, n: number) => s.padStart(n);

/** The first events that can be answered offline, written to `scratch`: by function id. */
function firstEvents(scratch: string): Map<string, { readonly file: string; readonly status: number }> {
  const receiver = JSON.parse(readFileSync(RECEIVER_FIXTURE, 'utf8')) as Record<string, unknown> & {
    requestContext: Record<string, unknown> & { http: Record<string, unknown> };
  };
  // The console's page, in the same API Gateway shape: no AWS call, files read at import.
  const { body: _body, pathParameters: _path, ...rest } = receiver;
  const consolePage = {
    ...rest,
    routeKey: 'GET /console',
    rawPath: '/console',
    headers: { host: 'a1b2c3d4e5.execute-api.ap-northeast-1.amazonaws.com', 'user-agent': 'Mozilla/5.0' },
    requestContext: {
      ...receiver.requestContext,
      routeKey: 'GET /console',
      http: { ...receiver.requestContext.http, method: 'GET', path: '/console' },
    },
    isBase64Encoded: false,
  };
  const consoleFile = path.join(scratch, 'console-get-page.json');
  writeFileSync(consoleFile, JSON.stringify(consolePage));
  return new Map([
    [RECEIVER, { file: RECEIVER_FIXTURE, status: 200 }],
    ['console', { file: consoleFile, status: 200 }],
  ]);
}

const stack = stackFunctions(path.join(REPO_ROOT, 'cdk.out'));
const selected = stack.functions.filter((fn) => !only || only.has(fn.spec.id));
if (selected.length === 0) throw new Error(`no function matches --only ${values.only}`);

const load = loadavg()[0]!;
console.log(
  `cold-start: ${selected.length} functions of ${path.relative(REPO_ROOT, stack.template)} (synthesized ${stack.synthesizedAt.toISOString()}), Node ${process.versions.node}, ${runs} fresh processes each, ${availableParallelism()} cores, load ${fmt(load, 2)}`,
);
for (const other of stack.others) console.log(`  skipped ${other.logicalId}: ${other.reason}`);

const stub = await startAwsStub();
const scratch = mkdtempSync(path.join(tmpdir(), 'switchboard-cold-start-'));
const results: Measured[] = [];
try {
  const events = firstEvents(scratch);
  const nodeDir = path.dirname(process.execPath);

  console.log('\nbuilding baselines and metafiles (esbuild, CDK options)…');
  const prepared: { fn: StackFunction; analysis: Analysis; label: string; bundle: string }[] = [];
  for (const fn of selected) {
    const analysis = await analyse(fn.spec.entry);
    const bundle = path.join(scratch, `${fn.spec.id}-baseline`, 'index.mjs');
    mkdirSync(path.dirname(bundle), { recursive: true });
    if (fn.spec.id === RECEIVER) {
      await buildBaseline({ kind: 'receiver' }, bundle);
      prepared.push({ fn, analysis, bundle, label: 'HMAC + one SQS SendMessage' });
    } else {
      const sdkPackages = sdkPackagesOf(fn.spec.entry);
      await buildBaseline({ kind: 'clients', source: clientsBaselineSource(sdkPackages) }, bundle);
      const clients = sdkPackages.map((pkg) => pkg.replace('@aws-sdk/', '')).join(', ');
      prepared.push({ fn, analysis, bundle, label: clients ? `bare handler + ${clients}` : 'bare handler' });
    }
  }

  console.log(`probing (each function and its baseline in alternation, ${runs} times)…`);
  for (const { fn, analysis, label, bundle } of prepared) {
    const env = lambdaEnvironment(fn, { stubUrl: stub.url, region: REGION, nodeDir });
    const baselineEnv = {
      ...env,
      LAMBDA_TASK_ROOT: path.dirname(bundle),
      BASELINE_CHANNEL_SECRET: BENCH_CHANNEL.secret,
    };
    const event = events.get(fn.spec.id);
    const ours: ProbeResult[] = [];
    const theirs: ProbeResult[] = [];
    for (let run = 0; run < runs; run++) {
      // Alternate who goes first, so neither always follows the other's page cache warming.
      const order = run % 2 === 0 ? ['ours', 'theirs'] : ['theirs', 'ours'];
      for (const who of order) {
        if (who === 'ours') ours.push(await runProbe(fn.bundle, env, event?.file));
        else theirs.push(await runProbe(bundle, baselineEnv, event?.file));
      }
    }
    const measured: Measured = {
      fn,
      analysis,
      baseline: { label, bundle, bytes: readFileSync(bundle).byteLength },
      ours,
      theirs,
      ...(event ? { expectedStatus: event.status } : {}),
    };
    results.push(measured);
    const m = figures(measured);
    console.log(
      `  ${pad(fn.spec.id, 18)} import ${fmt(m.importMs, 1)} ms vs ${fmt(m.baseImportMs, 1)} ms${event ? `, first event ${fmt(m.firstMs, 1)} ms vs ${fmt(m.baseFirstMs, 1)} ms` : ''}${m.problems.length ? `  ! ${m.problems[0]}` : ''}`,
    );
  }
} finally {
  await stub.stop();
  rmSync(scratch, { recursive: true, force: true });
}

/** A function's medians, ratios and what went wrong in its probes. */
function figures(m: Measured) {
  const ok = (r: ProbeResult) => !r.error;
  const importMs = median(m.ours.filter(ok).map((r) => r.importMs));
  const baseImportMs = median(m.theirs.filter(ok).map((r) => r.importMs));
  const answered = (results: readonly ProbeResult[]) =>
    results.filter((r) => ok(r) && r.firstEventMs !== undefined).map((r) => r.firstEventMs!);
  const firstMs = median(answered(m.ours));
  const baseFirstMs = median(answered(m.theirs));
  const problems = [...m.ours, ...m.theirs]
    .map((r, i) => {
      const who = i < m.ours.length ? 'ours' : 'baseline';
      if (r.error) return `${who}: ${r.error.split('\n')[0]}`;
      if (m.expectedStatus !== undefined && r.statusCode !== m.expectedStatus)
        return `${who}: first event answered ${r.statusCode}, expected ${m.expectedStatus}`;
      return undefined;
    })
    .filter((p): p is string => p !== undefined);
  return {
    importMs,
    baseImportMs,
    importRatio: importMs / baseImportMs,
    firstMs,
    baseFirstMs,
    firstRatio: firstMs / baseFirstMs,
    bytes: readFileSync(m.fn.bundle).byteLength,
    problems,
  };
}

const rows = results.map((m) => ({ m, f: figures(m) }));
console.log(
  `\n${pad('function', 18)} ${padStart('bundle KB', 10)} ${padStart('base KB', 8)} ${padStart('import ms', 10)} ${padStart('base ms', 8)} ${padStart('× import', 9)} ${padStart('+ ms', 7)} ${padStart('1st event', 10)} ${padStart('base', 6)} ${padStart('× 1st', 7)}  baseline`,
);
for (const { m, f } of rows) {
  const hasEvent = m.expectedStatus !== undefined;
  console.log(
    `${pad(m.fn.spec.id, 18)} ${padStart(fmt(kb(f.bytes), 1), 10)} ${padStart(fmt(kb(m.baseline.bytes), 1), 8)} ${padStart(fmt(f.importMs, 1), 10)} ${padStart(fmt(f.baseImportMs, 1), 8)} ${padStart(`×${fmt(f.importRatio, 2)}`, 9)} ${padStart(fmt(f.importMs - f.baseImportMs, 0), 7)} ${padStart(hasEvent ? fmt(f.firstMs, 1) : '—', 10)} ${padStart(hasEvent ? fmt(f.baseFirstMs, 1) : '—', 6)} ${padStart(hasEvent ? `×${fmt(f.firstRatio, 2)}` : '—', 7)}  ${m.baseline.label}`,
  );
}
console.log(
  `(KB = 1,024 bytes; ms = median of ${runs} fresh processes, import measured inside the process around \`await import()\`, Node's own start excluded; first event = the first handler call right after, its AWS calls answered by a stub on 127.0.0.1; NODE_OPTIONS=--enable-source-maps as deployed.)`,
);

const receiver = rows.find((r) => r.m.fn.spec.id === RECEIVER);
const overRatio = rows.filter((r) => !(r.f.importRatio <= GOALS.importRatio));
const overSize = rows.filter((r) => kb(r.f.bytes) > GOALS.bundleKb);
const verdict = (pass: boolean) => (pass ? 'PASS' : 'FAIL');
const list = (items: readonly string[]) => (items.length ? `: ${items.join(', ')}` : '');
console.log('\ngoals (issue 40):');
console.log(
  `  ${verdict(overRatio.length === 0)}  every function imports in ≤ ${GOALS.importRatio}× its baseline — ${overRatio.length} of ${rows.length} over${list(overRatio.map((r) => `${r.m.fn.spec.id} ×${fmt(r.f.importRatio, 1)}`))}`,
);
if (receiver)
  console.log(
    `  ${verdict(receiver.f.importRatio <= GOALS.receiverImportRatio)}  the webhook receiver imports in ≤ ${GOALS.receiverImportRatio}× its baseline — ×${fmt(receiver.f.importRatio, 2)} (${fmt(receiver.f.importMs, 1)} ms vs ${fmt(receiver.f.baseImportMs, 1)} ms)`,
  );
console.log(
  `  ${verdict(overSize.length === 0)}  no bundle over ${GOALS.bundleKb} KB — ${overSize.length} of ${rows.length} over${list(overSize.map((r) => `${r.m.fn.spec.id} ${fmt(kb(r.f.bytes))} KB`))}`,
);
if (receiver)
  console.log(
    `  ${verdict(kb(receiver.f.bytes) <= GOALS.receiverBundleKb)}  the webhook receiver's bundle ≤ ${GOALS.receiverBundleKb} KB — ${fmt(kb(receiver.f.bytes), 1)} KB`,
  );
if (rows.length < stack.functions.length) console.log('  (--only: the goals cover the functions measured)');

console.log(
  `\nwhat each bundle carries: top ${top} by bytes in the bundle (esbuild's metafile of the same entry, built as CDK builds it; packages, or this repository's folders):`,
);
for (const { m, f } of rows) {
  const rebuilt = m.analysis.bytes;
  const drift = Math.abs(rebuilt - f.bytes) / f.bytes > 0.02;
  console.log(
    `  ${m.fn.spec.id} — ${fmt(kb(f.bytes), 1)} KB${drift ? ` (rebuilt now: ${fmt(kb(rebuilt), 1)} KB; cdk.out is older than the code: npm run synth)` : ''}`,
  );
  for (const c of m.analysis.contributors.slice(0, top)) {
    console.log(
      `    ${padStart(fmt(kb(c.bytes), 1), 8)} KB ${padStart(`${fmt((100 * c.bytes) / rebuilt)}%`, 4)}  ${pad(c.name, 40)} largest: ${c.largest.file.replace(/^.*node_modules\//, '')} (${fmt(kb(c.largest.bytes), 1)} KB)`,
    );
  }
}

const problems = rows.flatMap(({ m, f }) => f.problems.map((p) => `${m.fn.spec.id}: ${p}`));
if (stub.refused.size > 0)
  console.log(
    `\nthe AWS stub refused (a probe needed more than it answers): ${[...stub.refused].map(([op, n]) => `${op} ×${n}`).join(', ')}`,
  );
if (problems.length > 0) {
  console.log(`\n${problems.length} probes failed or answered otherwise than expected:`);
  for (const problem of [...new Set(problems)].slice(0, 10)) console.log(`  ${problem}`);
  process.exitCode = 1;
}
