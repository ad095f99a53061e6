/** Reads the LINE webhook fixtures (test/fixtures/line) as the exact bytes LINE would send. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const DIR = path.join(import.meta.dirname, '../../fixtures/line');

/** The names (without `.json`) of every webhook body fixture. */
export const webhookFixtureNames: readonly string[] = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .map((f) => f.slice(0, -'.json'.length))
  .sort();

/** A fixture's raw bytes. */
export function fixtureBytes(name: string): Buffer {
  return readFileSync(path.join(DIR, `${name}.json`));
}
