/**
 * Builds the console into one flat folder: `index.html`, a hashed script and stylesheet, and the
 * Japanese font's files (woff2 only: every browser the console supports reads it). esbuild, as the
 * Lambdas are bundled. `node console/build.ts [outDir]` builds by hand; the stack and `npm start`
 * call {@link buildConsole}.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { buildSync } from 'esbuild';

const HERE = import.meta.dirname;
const FONT_CSS = '@fontsource/noto-sans-jp/400.css';

/**
 * Builds the console into `outDir` (emptied first); answers the files' names. Synchronous (under
 * a second): the CDK app builds it while it synthesizes, which cannot wait.
 */
export function buildConsole(outDir: string): readonly string[] {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  return buildInto(outDir, woff2OnlyFontCss());
}

/**
 * fontsource lists a woff fallback after each woff2: a copy of its stylesheet without them (and
 * with paths to fontsource's files), so only the woff2 files ship. esbuild's synchronous API takes no
 * plugin, so the copy is written aside and aliased in.
 *
 * The copy's path is part of what esbuild hashes into the script's name, so it is a fixed place in
 * the checkout (named by its content, written whole by a rename): the same tree builds the same
 * files, and `cdk deploy` does not publish the console again when nothing changed (a temporary
 * folder gave the script a new name on every build).
 */
function woff2OnlyFontCss(): string {
  const source = createRequire(import.meta.url).resolve(FONT_CSS);
  const dir = path.join(HERE, '..', 'node_modules', '.cache', 'switchboard-console');
  const files = path
    .relative(dir, path.join(path.dirname(source), 'files'))
    .split(path.sep)
    .join('/');
  const css = readFileSync(source, 'utf8')
    .replace(/,\s*url\([^)]*\.woff\)\s*format\('woff'\)/g, '')
    .replace(/url\(\.\/files\//g, `url(${files}/`);
  mkdirSync(dir, { recursive: true });
  const name = `noto-sans-jp-400-${createHash('sha256').update(css).digest('hex').slice(0, 16)}.css`;
  const copy = path.join(dir, name);
  if (!existsSync(copy)) {
    const partial = `${copy}.${process.pid}.${randomUUID()}`;
    writeFileSync(partial, css);
    renameSync(partial, copy);
  }
  return copy;
}

function buildInto(outDir: string, fontCss: string): readonly string[] {
  const result = buildSync({
    entryPoints: [path.join(HERE, 'src/main.ts')],
    // Paths relative to the checkout, so two clones build the same names.
    absWorkingDir: path.join(HERE, '..'),
    bundle: true,
    format: 'esm',
    // The chart library loads with the job page, in a chunk of its own.
    splitting: true,
    chunkNames: 'chunk-[hash]',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: false,
    outdir: outDir,
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    loader: { '.woff2': 'file' },
    alias: { [FONT_CSS]: fontCss },
    metafile: true,
    logLevel: 'silent',
    legalComments: 'none',
  });
  const outputs = Object.keys(result.metafile.outputs).map((file) => path.basename(file));
  const entry = Object.entries(result.metafile.outputs).find(([, o]) =>
    o.entryPoint?.endsWith('src/main.ts'),
  );
  const js = entry ? path.basename(entry[0]) : undefined;
  const css = entry?.[1].cssBundle ? path.basename(entry[1].cssBundle) : undefined;
  if (!js || !css) throw new Error('the console build wrote no script or no stylesheet');
  const page = readFileSync(path.join(HERE, 'index.html'), 'utf8')
    .replace('{{js}}', js)
    .replace('{{css}}', css);
  writeFileSync(path.join(outDir, 'index.html'), page);
  return [...outputs, 'index.html'];
}

if (import.meta.main) {
  const outDir = path.resolve(process.argv[2] ?? path.join(HERE, 'dist'));
  const files = buildConsole(outDir);
  console.log(`console built: ${files.length} files in ${outDir}`);
}
