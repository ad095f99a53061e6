/**
 * What the Lambdas run in this process write to CloudWatch Logs on AWS, for the cost bench: every
 * write to stdout or stderr made inside an invocation (the function is the call's `awsPrincipal`,
 * set by `local/lambda.ts`) is counted for that function, by bytes and log events (one a line), and
 * not printed. Writes outside any invocation pass through unchanged.
 *
 * The Lambdas must log as deployed for the count to mean anything: Powertools' level `info` (the
 * stack sets no `LOG_LEVEL`) and metrics on (EMF records are log lines too).
 */
import { awsPrincipal } from '#local/iam/recorder.ts';

/** Bytes and log events written by one function. */
export interface LogVolume {
  bytes: number;
  events: number;
}

/** Counts the log output of in-process Lambdas by function until `uninstall()`. */
export class LambdaLogMeter {
  readonly #volumes: Record<string, LogVolume> = {};

  install(): () => void {
    const restore = [process.stdout, process.stderr].map((stream) => {
      const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
      stream.write = ((chunk: unknown, ...rest: unknown[]) => {
        const fn = awsPrincipal.getStore();
        if (fn === undefined) return write(chunk, ...rest);
        const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
        this.#volumes[fn] ??= { bytes: 0, events: 0 };
        const v = this.#volumes[fn];
        v.bytes += Buffer.byteLength(text);
        v.events += text.split('\n').filter((line) => line.length > 0).length;
        const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
        done?.();
        return true;
      }) as typeof stream.write;
      return () => {
        stream.write = write as typeof stream.write;
      };
    });
    return () => {
      for (const r of restore) r();
    };
  }

  /** A copy of the volumes so far, by function. */
  snapshot(): Record<string, LogVolume> {
    return structuredClone(this.#volumes);
  }
}
