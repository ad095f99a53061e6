/** Typed errors for configuration; read once at start-up, never a silent default. */
import { SwitchboardError } from './errors.ts';

export class ConfigError extends SwitchboardError {}

/** Reads a required environment variable, throwing a clear error when it is missing or empty. */
export function getStringFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new ConfigError(`missing required environment variable ${name}`);
  }
  return value;
}

/** Reads an optional environment variable: undefined when it is missing or empty. */
export function getOptionalStringFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** Reads a positive number from the environment, or the given default when unset. */
export function getNumberFromEnv(
  name: string,
  fallback: number,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    throw new ConfigError(
      `environment variable ${name} must be a non-negative number, got ${JSON.stringify(raw)}`,
    );
  }
  return value;
}

/**
 * The environment variable by which the local cloud runs every process at another date and time
 * (`npm start -- --at …`): milliseconds added to the system's time. Never set in AWS.
 */
export const CLOCK_OFFSET_ENV = 'SWITCHBOARD_CLOCK_OFFSET_MS';

/**
 * The clock a process reads the time from: the system's, shifted by {@link CLOCK_OFFSET_ENV} when
 * the local cloud sets it, so that a public holiday, a window closing at midnight or a quota
 * month's end can be tried on any day. Read once, at start.
 */
export function clockFromEnv(env: NodeJS.ProcessEnv = process.env): { now(): number } {
  const raw = env[CLOCK_OFFSET_ENV];
  if (raw === undefined || raw === '' || raw === '0') return { now: () => Date.now() };
  const offset = Number(raw);
  if (!Number.isSafeInteger(offset)) {
    throw new ConfigError(
      `environment variable ${CLOCK_OFFSET_ENV} must be whole milliseconds, got ${JSON.stringify(raw)}`,
    );
  }
  return { now: () => Date.now() + offset };
}
