#!/usr/bin/env node
/**
 * `npm run ops -- …` (or `npx switchboard-ops …` from a checkout): the operator CLI. Client
 * settings, jobs (upload a list with a progress bar, watch it, pause, resume, cancel, download
 * the report) and opt-outs, through the operator API, signed with SigV4. `--help` says the rest;
 * the commands live in `scripts/ops/`.
 */
import { runOps } from './ops/run.ts';

process.exitCode = await runOps(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
});
