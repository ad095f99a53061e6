/**
 * The README and the docs/ pages are read by newcomers first: what they name must exist. Every
 * `npm run X` is a script, every repo path in backticks is a file or folder, every relative link
 * reaches a file and, with a `#anchor`, one of its headings (GitHub's slugs).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const README = join(ROOT, 'README.md');
const PAGES = [
  README,
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(ROOT, 'docs', name)),
];
const SCRIPTS = new Set(Object.keys(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts));
/** The top folders whose paths a page may cite in backticks. */
const REPO_PATH = /^(shared|docs|local|scripts|bench|cdk|lambdas|worker|console|test)\/[\w.@/-]*$/;

const text = (file: string) => readFileSync(file, 'utf8');
const name = (file: string) => relative(ROOT, file);

/** The page without its fenced code blocks (same line count, so line numbers still hold). */
function withoutFences(markdown: string): string {
  let inFence = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line;
    })
    .join('\n');
}

/** Inline code spans outside fenced blocks. */
function codeSpans(markdown: string): string[] {
  return [...withoutFences(markdown).matchAll(/(`+)([^`]+?)\1/g)].map((m) => (m[2] ?? '').trim());
}

/** GitHub's anchor for a heading's text (github-slugger): lower case, punctuation dropped, spaces → hyphens. */
function githubSlug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .replace(/(\*\*|__|\*|_)(\S.*?)\1/g, '$2');
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page's headings give, duplicates numbered as GitHub numbers them. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = githubSlug(heading[1] ?? '');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

describe('README.md', () => {
  const readme = text(README);

  it('is at most 250 lines', () => {
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(250);
  });

  it('begins with the two commands a newcomer needs: npm ci && npm start, then npm test', () => {
    const firstBlock = /```\w*\n([\s\S]*?)```/.exec(readme);
    expect(readme.indexOf('```')).toBeLessThan(readme.indexOf('\n## '));
    const commands = (firstBlock?.[1] ?? '')
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
      .filter(Boolean);
    expect(commands.slice(0, 2)).toEqual(['npm ci && npm start', 'npm test']);
  });
});

describe.each(PAGES.map((file) => [name(file), file]))('%s', (_, file) => {
  const markdown = text(file);

  it('names only npm scripts that package.json has', () => {
    const named = [
      ...[...markdown.matchAll(/\bnpm run ([\w:.-]+)/g)].map((m) => m[1] ?? ''),
      ...[...markdown.matchAll(/\bnpm (start|test)\b/g)].map((m) => m[1] ?? ''),
    ];
    expect(named.filter((script) => !SCRIPTS.has(script))).toEqual([]);
  });

  it('cites only repo paths that exist', () => {
    const cited = [
      ...codeSpans(markdown).filter((span) => REPO_PATH.test(span.replace(/:\d+(-\d+)?$/, ''))),
      ...[...markdown.matchAll(/\bnode ((?:\.\/)?[\w./-]+\.(?:ts|js|mjs))\b/g)].map((m) => m[1] ?? ''),
    ].map((path) => path.replace(/:\d+(-\d+)?$/, ''));
    expect(cited.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    const prose = withoutFences(markdown).replace(/(`+)[^`]+?\1/g, '');
    for (const [, target = ''] of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#', 2);
      const linked = path ? resolve(dirname(file), decodeURIComponent(path)) : file;
      if (!existsSync(linked)) broken.push(`${target}: no such file`);
      else if (anchor !== undefined && linked.endsWith('.md') && !anchors(text(linked)).has(anchor))
        broken.push(`${target}: no such heading in ${name(linked)}`);
    }
    expect(broken).toEqual([]);
  });
});

describe('githubSlug', () => {
  it('slugs headings as GitHub does', () => {
    expect(githubSlug("The chart's data")).toBe('the-charts-data');
    expect(githubSlug('`PUT /clients/{clientId}` / `GET`')).toBe('put-clientsclientid--get');
    expect(githubSlug('What AWS enforces, and what each choice rests on')).toBe(
      'what-aws-enforces-and-what-each-choice-rests-on',
    );
    expect(githubSlug('`GET …/jobs/{jobId}/report`')).toBe('get-jobsjobidreport');
    expect(githubSlug('Where is…')).toBe('where-is');
  });
});
