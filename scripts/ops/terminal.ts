/**
 * The CLI's two outputs: results on stdout (text, or JSON with `--json`), everything about getting
 * them on stderr — a live line redrawn in place on a terminal (upload bar, job progress), or one
 * line per change when stderr is a file or a pipe.
 */

export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** Any URL's query hidden: a presigned URL's query is a credential. */
export function withoutQueries(text: string): string {
  return text.replace(/(https?:\/\/[^\s?#]+)\?[^\s]*/g, '$1?…');
}

export class Terminal {
  readonly #out: OutputStream;
  readonly #err: OutputStream;
  /** Whether a live line is on screen (TTY only). */
  #live = false;
  #lastLine: string | undefined;

  constructor(out: OutputStream, err: OutputStream) {
    this.#out = out;
    this.#err = err;
  }

  get interactive(): boolean {
    return this.#err.isTTY === true;
  }

  /** A result on stdout. */
  print(text: string): void {
    this.#clearLive();
    this.#out.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  printJson(value: unknown): void {
    this.print(JSON.stringify(value, null, 2));
  }

  /** A line on stderr that stays. */
  note(text: string): void {
    this.#clearLive();
    this.#err.write(`${withoutQueries(text)}\n`);
  }

  /**
   * The live line: redrawn in place on a terminal (cut to its width); elsewhere written as a line
   * when it differs from the last one, or not at all when `transient` (an upload bar's steps).
   */
  live(text: string, options: { readonly transient?: boolean } = {}): void {
    if (this.interactive) {
      // A terminal that does not say its width (0 under some ptys) is taken as 100 columns.
      const width = Math.max(20, (this.#err.columns || 100) - 1);
      const chars = [...text];
      const shown = chars.length > width ? `${chars.slice(0, width - 1).join('')}…` : text;
      this.#err.write(`\r\x1b[2K${shown}`);
      this.#live = true;
      return;
    }
    if (options.transient || text === this.#lastLine) return;
    this.#lastLine = text;
    this.#err.write(`${text}\n`);
  }

  /** Ends the live line where it is (it stays on screen). */
  endLive(): void {
    if (this.#live) this.#err.write('\n');
    this.#live = false;
  }

  /** Removes the live line (before an error, or a note). */
  #clearLive(): void {
    if (this.#live) this.#err.write('\r\x1b[2K');
    this.#live = false;
  }

  /** An error: one line on stderr, no URL query in it. */
  error(line: string): void {
    this.#clearLive();
    this.#err.write(`error: ${withoutQueries(line)}\n`);
  }
}
