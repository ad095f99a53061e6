/**
 * Builds the console into one flat folder: `index.html`, a hashed script and stylesheet, and the
 * Japanese font's files (woff2 only: every browser the console supports reads it). esbuild, as the
 * Lambdas are bundled. `node console/build.ts [outDir]` builds by hand; the stack and `npm start`
 * call {@link buildConsole}.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
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
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-console-build-'));
  try {
    return buildInto(outDir, woff2OnlyFontCss(workDir));
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

/**
 * fontsource lists a woff fallback after each woff2: a copy of its stylesheet without them (and
 * with absolute file paths), so only the woff2 files ship. esbuild's synchronous API takes no
 * plugin, so the copy is written aside and aliased in.
 */
function woff2OnlyFontCss(workDir: string): string {
  const source = createRequire(import.meta.url).resolve(FONT_CSS);
  const css = readFileSync(source, 'utf8')
    .replace(/,\s*url\([^)]*\.woff\)\s*format\('woff'\)/g, '')
    .replace(/url\(\.\/files\//g, `url(${path.dirname(source)}/files/`);
  const copy = path.join(workDir, 'noto-sans-jp-400.css');
  writeFileSync(copy, css);
  return copy;
}

function buildInto(outDir: string, fontCss: string): readonly string[] {
  const result = buildSync({
    entryPoints: [path.join(HERE, 'src/main.ts')],
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
