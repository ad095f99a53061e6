/**
 * The CLI's errors: each is one line for stderr and an exit status. A usage error is 2; anything
 * that went wrong doing the work (the API said no, the network failed, no credentials) is 1.
 */

/** A bad command line or input file: exit 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The work could not be done: exit 1. The message is already one line, fit for stderr. */
export class OpsError extends Error {
  override name = 'OpsError';
}

/** The API answered with an error status. */
export class ApiError extends OpsError {
  override name = 'ApiError';
  readonly status: number;
  readonly fieldErrors: Readonly<Record<string, readonly string[]>>;

  constructor(
    message: string,
    status: number,
    fieldErrors: Readonly<Record<string, readonly string[]>> = {},
  ) {
    super(message);
    this.status = status;
    this.fieldErrors = fieldErrors;
  }
}

/** What to print and the exit status for any error the CLI meets. */
export function describeError(error: unknown): { readonly line: string; readonly exitCode: number } {
  if (error instanceof UsageError) return { line: error.message, exitCode: 2 };
  if (error instanceof OpsError) return { line: error.message, exitCode: 1 };
  const e = error as { name?: string; message?: string };
  // The SDK's credential chain found nothing (or an expired SSO session): its message names no secret.
  if (e?.name === 'CredentialsProviderError' || e?.name === 'TokenProviderError') {
    return {
      line: `no usable AWS credentials: ${oneLine(e.message ?? '')} (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, run "aws sso login", or use --local for npm start)`,
      exitCode: 1,
    };
  }
  return { line: `unexpected error: ${oneLine(e?.message ?? String(error))}`, exitCode: 1 };
}

/** Collapses line breaks: every error is one line on stderr. */
export function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}

/** The API (or S3) could not be reached, or did not answer in time: worth retrying while watching. */
export class NetworkError extends OpsError {
  override name = 'NetworkError';
}

/** Whether a watcher should try again: the network, a 5xx, a 429. Anything else will not change. */
export function isTransient(error: unknown): boolean {
  if (error instanceof NetworkError) return true;
  return error instanceof ApiError && (error.status >= 500 || error.status === 429);
}
