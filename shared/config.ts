/** Typed errors for configuration; read once at start-up, never a silent default. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Reads a required environment variable, throwing a clear error when it is missing or empty. */
export function getStringFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new ConfigError(`missing required environment variable ${name}`);
  }
  return value;
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
