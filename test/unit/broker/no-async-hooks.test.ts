/**
 * The broker's module graph must not load X-Ray's `cls-hooked` (Powertools' Tracer): its async hook
 * makes every promise of the process about ten times as costly (`shared/adapters/powertools.ts`).
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../../..');

function loadedModules(entry: string, env: Record<string, string> = {}): string[] {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(pathToFileURL(path.join(ROOT, entry)).href)});
    console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as string[];
}

describe("the broker's modules", () => {
  it('do not load the X-Ray SDK or cls-hooked', () => {
    const loaded = loadedModules('worker/process.ts');
    expect(loaded.some((m) => m.includes('@aws-sdk'))).toBe(true);
    expect(loaded.filter((m) => /cls-hooked|aws-xray-sdk/.test(m))).toEqual([]);
  });

  it('nor does a Lambda entry outside Lambda (the local cloud), while in Lambda it traces', () => {
    const outside = loadedModules('shared/adapters/lambda-observability.ts', {
      AWS_LAMBDA_FUNCTION_NAME: '',
    });
    expect(outside.filter((m) => /cls-hooked/.test(m))).toEqual([]);
    const inLambda = loadedModules('shared/adapters/lambda-observability.ts', {
      AWS_LAMBDA_FUNCTION_NAME: 'switchboard-test-job-manager',
    });
    expect(inLambda.some((m) => /cls-hooked/.test(m))).toBe(true);
  });
});
