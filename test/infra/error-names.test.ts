/**
 * An error's `name` in a deployed bundle: every function is bundled minified
 * (`LAMBDA_BUNDLING`), and `SwitchboardError` takes `name` from the class (`new.target.name`), so the
 * bundling must keep class names — or logs would say `r` for a ValidationError.
 */
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { LAMBDA_BUNDLING, REPO_ROOT } from '#cdk/constructs/function.ts';

const ENTRY = `
import { ValidationError } from '#shared/jobs/errors.ts';
import { SignatureMismatchError } from '#shared/telephony/callback-signature.ts';
import { SwitchboardError } from '#shared/errors.ts';
export const names = [
  new ValidationError('bad', {}).name,
  new SignatureMismatchError('no').name,
  new SwitchboardError('root').name,
];
`;

async function namesWhenBundled(keepNames: boolean): Promise<string[]> {
  const out = await build({
    stdin: { contents: ENTRY, resolveDir: REPO_ROOT, loader: 'ts' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: LAMBDA_BUNDLING.target,
    minify: LAMBDA_BUNDLING.minify,
    keepNames,
    write: false,
    logLevel: 'silent',
  });
  const code = out.outputFiles[0]!.text;
  const module = (await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)) as {
    names: string[];
  };
  return module.names;
}

describe("an error's name in a Lambda bundle", () => {
  it('is its class name, as the functions are bundled', async () => {
    expect(LAMBDA_BUNDLING.keepNames).toBe(true);
    expect(await namesWhenBundled(LAMBDA_BUNDLING.keepNames)).toEqual([
      'ValidationError',
      'SignatureMismatchError',
      'SwitchboardError',
    ]);
  });

  it('would be mangled by minification without keepNames (what the setting is for)', async () => {
    expect(await namesWhenBundled(false)).not.toContain('ValidationError');
  });
});
