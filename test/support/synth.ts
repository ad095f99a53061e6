/**
 * Synthesizes the app with CDK context, as `cdk synth -c …` does, into a temporary directory that
 * is removed after the file's tests (no asset bundling: the templates are what is asserted).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll } from 'vitest';
import { buildApp } from '#cdk/app.ts';

/** A `synth(context)` for one test file; `defaults` go under every call's context. */
export function synthesizer(name: string, defaults: Record<string, unknown> = {}) {
  const outdirs: string[] = [];
  afterAll(() => {
    for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
  });
  return (context: Record<string, unknown>) => {
    const outdir = mkdtempSync(join(tmpdir(), `switchboard-${name}-`));
    outdirs.push(outdir);
    const built = buildApp(
      new App({ outdir, context: { 'aws:cdk:bundling-stacks': [], ...defaults, ...context } }),
    );
    built.app.synth();
    return { stack: built.stack, template: Template.fromStack(built.stack) };
  };
}
