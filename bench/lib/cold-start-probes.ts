/**
 * Runs cold-start probes for bench/cold-start: each one a fresh Node process (this one's binary,
 * Node 24) with only the environment given, importing one bundle and answering at most one event
 * (`cold-start-probe.ts`). Probes run one at a time: the machine's two cores are shared.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** What one probe measured (written by `cold-start-probe.ts` to its file descriptor 3). */
export interface ProbeResult {
  readonly importMs: number;
  readonly firstEventMs?: number;
  /** The first answer's `statusCode` (API Gateway results), when it has one. */
  readonly statusCode?: number;
  readonly error?: string;
}

const PROBE = fileURLToPath(new URL('./cold-start-probe.ts', import.meta.url));
const PROBE_TIMEOUT_MS = 60_000;
const KEPT_OUTPUT_CHARS = 2_000;

/** Imports `bundle` (and answers `eventPath`'s event) in a fresh process with exactly `env`. */
export function runProbe(
  bundle: string,
  env: Readonly<Record<string, string>>,
  eventPath?: string,
): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PROBE, bundle, ...(eventPath ? [eventPath] : [])], {
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      timeout: PROBE_TIMEOUT_MS,
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-KEPT_OUTPUT_CHARS);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const result: Buffer[] = [];
    child.stdio[3]?.on('data', (chunk: Buffer) => result.push(chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      const text = Buffer.concat(result).toString('utf8');
      if (!text) {
        reject(new Error(`probe of ${bundle} ended (${signal ?? code}) without a result:\n${output}`));
        return;
      }
      const parsed = JSON.parse(text) as ProbeResult;
      resolve(parsed.error ? { ...parsed, error: `${parsed.error}\n${output}` } : parsed);
    });
  });
}

/** The median of `values` (NaN when empty). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
