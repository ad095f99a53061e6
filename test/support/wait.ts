/**
 * Waiting in tests for something that happens asynchronously (a queue drained, a task ended, a
 * broker letting go): the check is polled until it holds. The bound is against a hang, never a
 * speed requirement: suites share a 2-core machine.
 */
export interface WaitOptions {
  /** Give up after this long (default 100 s). */
  readonly timeoutMs?: number;
  /** Poll this often (default 100 ms). */
  readonly everyMs?: number;
}

/**
 * Resolves with the first value `check` returns that is not undefined; `what` names what was
 * awaited in the timeout's message (a function: read then, to say what was last seen).
 */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string | (() => string),
  options: WaitOptions = {},
): Promise<T> {
  const { timeoutMs = 100_000, everyMs = 100 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Resolves once `check` holds. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string | (() => string),
  options: WaitOptions = {},
): Promise<void> {
  await eventually(async () => ((await check()) ? true : undefined), what, options);
}
