/**
 * Reading a job's report (`shared/jobs/report.ts`: `row, recipient, outcome, attempts,
 * last_result, reason, column, value`, rejected and skipped rows first) for the ingest's result:
 * only its first lines are read, then the download is stopped, so a million-row report costs a
 * few kilobytes here.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { parse } from 'csv-parse';
import type { RowProblem } from './format.ts';

/** A report cell as written, without the `'` that keeps a spreadsheet from reading it as a formula. */
export function unguardCell(cell: string): string {
  return /^'[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell;
}

/** A report record as a row problem, or undefined when it is a task's line (or the header). */
export function rowProblemOf(record: readonly string[], header: readonly string[]): RowProblem | undefined {
  const at = (name: string) => {
    const i = header.indexOf(name);
    return i === -1 ? undefined : unguardCell(record[i] ?? '');
  };
  const outcome = at('outcome');
  if (outcome !== 'rejected' && outcome !== 'skipped') return undefined;
  const column = at('column');
  const value = at('value');
  return {
    row: Number(at('row')),
    outcome,
    reason: at('reason') ?? '',
    ...(column ? { column } : {}),
    ...(value ? { value } : {}),
  };
}

/** The first `max` rejected or skipped rows of a report's stream; stops reading at the first task. */
export async function firstRowProblems(
  body: ReadableStream<Uint8Array>,
  max: number,
  stop: () => void,
): Promise<RowProblem[]> {
  const source = Readable.fromWeb(body as WebReadableStream<Uint8Array>);
  const parser = source.pipe(parse({ bom: true, relax_column_count: true }));
  let stopped = false;
  // Stopping the download errors the source: the end we asked for. Any other error ends the parse.
  source.on('error', (error) => {
    if (!stopped) parser.destroy(error);
  });
  const problems: RowProblem[] = [];
  let header: string[] | undefined;
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      if (!header) {
        header = record;
        continue;
      }
      const problem = rowProblemOf(record, header);
      if (!problem) break;
      problems.push(problem);
      if (problems.length >= max) break;
    }
  } finally {
    stopped = true;
    stop();
    source.destroy();
    parser.destroy();
  }
  return problems;
}
