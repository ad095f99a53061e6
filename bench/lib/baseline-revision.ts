/**
 * A benchmark's baseline as an older revision of this repository, built beside the working tree:
 * designs production no longer has (message claims recorded on each task, a task a recipient, the
 * job manager before its ready hints) are measured at the last revision that had them, so that no
 * switch for them is left in `shared/`, `lambdas/` or `worker/`.
 *
 * The revision's files are taken with `git archive` into a directory of the system's temporary
 * folder (made once, reused by later runs), with this checkout's `node_modules` linked in: its
 * `#shared/...` imports resolve inside it, its packages are this checkout's. A clone without that
 * revision (a shallow one) is told how to get it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The last revision with the designs before claim pages and chunks (`BROKER_CLAIM_RECORDS=task`,
 * `INGEST_MULTICAST_CHUNKS` / `INGEST_PERSONALISED_CHUNKS=off`) and the job manager before ready
 * hints (`bench/lib/today/`).
 */
export const BEFORE_CLAIM_PAGES = '4b70298f5aa433157c8b427c35abd6cedb7a3851';

const READY_MARK = '.switchboard-baseline';

/** The directory holding `revision`'s files, made on first use. */
export function baselineTree(revision: string = BEFORE_CLAIM_PAGES): string {
  const tree = path.join(os.tmpdir(), `switchboard-baseline-${revision.slice(0, 12)}`);
  if (existsSync(path.join(tree, READY_MARK))) return tree;
  const building = mkdtempSync(`${tree}-building-`);
  try {
    const archive = path.join(building, 'revision.tar');
    git(['archive', '--format=tar', '-o', archive, revision], revision);
    execFileSync('tar', ['-xf', archive, '-C', building]);
    rmSync(archive);
    symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(building, 'node_modules'), 'dir');
    writeFileSync(path.join(building, READY_MARK), `${revision}\n`);
    rmSync(tree, { recursive: true, force: true });
    mkdirSync(path.dirname(tree), { recursive: true });
    renameSync(building, tree);
  } catch (error) {
    rmSync(building, { recursive: true, force: true });
    throw error;
  }
  return tree;
}

/** A module of the baseline's tree, imported (its own `#shared` imports resolve in that tree). */
export function importFromBaseline<T>(
  relativePath: string,
  revision: string = BEFORE_CLAIM_PAGES,
): Promise<T> {
  return import(pathToFileURL(path.join(baselineTree(revision), relativePath)).href) as Promise<T>;
}

function git(args: readonly string[], revision: string): void {
  try {
    execFileSync('git', ['-C', REPO_ROOT, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    throw new Error(
      `The baseline runs at revision ${revision.slice(0, 12)}, which this checkout cannot give (a shallow clone, or no git): run \`git fetch --unshallow\`, or measure without the baseline.`,
      { cause: error },
    );
  }
}
