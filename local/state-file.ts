/**
 * Where a running `npm start` can be found: it writes its HTTP API's URL, region and the
 * credentials its API Gateway stand-in accepts (the local ones, public constants, not secrets) to
 * `.switchboard/local.json` in the checkout (git-ignored), and removes the file when it exits. The
 * operator CLI (`npm run ops -- --local …`) reads it. Only node:fs here: the CLI starts fast.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/** `SWITCHBOARD_LOCAL_STATE` names another file (tests, two checkouts side by side). */
export function localStatePath(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env.SWITCHBOARD_LOCAL_STATE ?? path.join(ROOT, '.switchboard', 'local.json');
}

/**
 * Where `npm start`'s SES stand-in writes the emails it sends (`.eml` files): beside the state file,
 * named after it (`.switchboard/local-emails/` by default).
 */
export function localOutboxPath(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const file = localStatePath(env);
  return path.join(path.dirname(file), `${path.basename(file, path.extname(file))}-emails`);
}

export interface LocalState {
  /** The HTTP API stand-in, e.g. `http://127.0.0.1:3000`. */
  readonly apiUrl: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** The `npm start` process: a file whose process is gone is stale. */
  readonly pid: number;
  readonly startedAt: string;
}

/**
 * Writes the file for this process and removes it when the process exits (if it still names this
 * process: a second `npm start` may have taken it over).
 */
export function writeLocalState(
  state: Pick<LocalState, 'apiUrl' | 'region' | 'credentials'>,
  file: string = localStatePath(),
): void {
  const { accessKeyId, secretAccessKey } = state.credentials;
  const full: LocalState = {
    apiUrl: state.apiUrl,
    region: state.region,
    credentials: { accessKeyId, secretAccessKey },
    pid: process.pid,
    startedAt: new Date().toISOString(),
  };
  mkdirSync(path.dirname(file), { recursive: true });
  // Written whole, then renamed: a reader never sees half a file.
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(full, null, 2)}\n`);
  renameSync(partial, file);
  process.once('exit', () => {
    if (readLocalStateFile(file)?.pid === process.pid) rmSync(file, { force: true });
  });
}

/** The file's content, if it is there and readable (alive or not). */
export function readLocalStateFile(file: string = localStatePath()): LocalState | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const state = JSON.parse(text) as Partial<LocalState>;
    if (
      typeof state.apiUrl === 'string' &&
      typeof state.region === 'string' &&
      typeof state.pid === 'number' &&
      typeof state.credentials?.accessKeyId === 'string' &&
      typeof state.credentials.secretAccessKey === 'string'
    )
      return state as LocalState;
  } catch {
    // not ours, or cut short: as if absent
  }
  return undefined;
}

/** The running `npm start` the file names: undefined when there is no file or its process is gone. */
export function readLocalState(file: string = localStatePath()): LocalState | undefined {
  const state = readLocalStateFile(file);
  return state && isAlive(state.pid) ? state : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, it is someone else's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
