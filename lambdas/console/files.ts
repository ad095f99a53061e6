/** Reads the built console (a flat folder of files) into memory, once, at start. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ConsoleFile } from './handler.ts';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
};

/** Every file in `dir` by name, with its content type (a file of another kind is not served). */
export function readConsoleFiles(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const contentType = CONTENT_TYPES[path.extname(entry.name).toLowerCase()];
    if (!contentType) continue;
    files.set(entry.name, { body: readFileSync(path.join(dir, entry.name)), contentType });
  }
  return files;
}
