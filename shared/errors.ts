/**
 * The root of Switchboard's errors. The rule: one base per area (`JobError`, `TelephonyError`,
 * `LineError`, …, each in its area's `errors.ts`), every error of the area extends it; code that
 * catches an error and throws its own passes the caught one on as `{ cause: error }`, so the log
 * keeps the whole chain and a caller can still tell what went wrong below.
 */
export class SwitchboardError extends Error {
  // `message` is optional as `Error`'s is, so an error class still fits where any `Error` class does.
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    // The class's own name: Lambda's bundles keep class names through minification (esbuild's
    // `keepNames`, cdk/constructs/function.ts), so no error class spells its name again.
    this.name = new.target.name;
  }
}
