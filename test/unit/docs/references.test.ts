/**
 * Every repo path the docs name must be a file or folder of the repo: not only a code span that is
 * a path by itself (`test/unit/readme.test.ts` checks those and links), but a path anywhere in the
 * text of docs/*.md and README.md: inside a longer code span, in a fenced block, in prose. A path is
 * one that starts with a top-level folder of the repo; a glob (`serve-*.ts`), a template
 * (`{jobId}`) or a path inside a URL is not one.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const TOP_FOLDERS = 'shared lambdas worker local console cdk bench test docs scripts'.split(' ');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/**
 * A repo path: a top folder, `/`, then path characters. Not when glued to what comes before (a
 * URL's `…/test/…`, `../shared/DESIGN.md` outside the repo, `#shared/…` import aliases).
 */
const REPO_PATH = new RegExp(`(?<![\\w./#@:-])((?:${TOP_FOLDERS.join('|')})/[\\w.@/-]*)([*{]?)`, 'g');

/** The repo paths a page names, with their line numbers. */
function repoPathsIn(markdown: string): { path: string; line: number }[] {
  const found: { path: string; line: number }[] = [];
  markdown.split('\n').forEach((text, index) => {
    for (const match of text.matchAll(REPO_PATH)) {
      const [, raw = '', glob] = match;
      if (glob) continue; // `shared/broker/serve-*.ts`, `archives/{clientId}/…`
      // A sentence's end or a `:12` line number is not part of the path.
      const path = raw.replace(/:\d+(-\d+)?$/, '').replace(/[.]+$/, '');
      found.push({ path, line: index + 1 });
    }
  });
  return found;
}

describe('repoPathsIn', () => {
  it('finds paths in prose, in longer code spans and in fences, but not globs, URLs or aliases', () => {
    const page = [
      'See shared/jobs/model.ts. The `shared/jobs/api.ts` `JobsApi`, and (`worker/main.ts:12`).',
      '```',
      ' MessageServer            shared/broker/serve-*.ts',
      ' keys under docs/',
      '```',
      'https://github.com/ulid/javascript/blob/main/test/node/uuid.spec.ts, `#shared/ids.ts`,',
      '`../shared/DESIGN.md`, `archives/{clientId}/report.csv`, `bench/{name}.ts`',
    ].join('\n');
    expect(repoPathsIn(page)).toEqual([
      { path: 'shared/jobs/model.ts', line: 1 },
      { path: 'shared/jobs/api.ts', line: 1 },
      { path: 'worker/main.ts', line: 1 },
      { path: 'docs/', line: 4 },
    ]);
  });
});

describe.each(PAGES)('%s', (page) => {
  it('names only repo paths that exist', () => {
    const missing = repoPathsIn(readFileSync(join(ROOT, page), 'utf8'))
      .filter(({ path }) => !existsSync(join(ROOT, path)))
      .map(({ path, line }) => `${page}:${line}: ${path}`);
    expect(missing).toEqual([]);
  });
});
