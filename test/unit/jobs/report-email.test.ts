/**
 * The report's `email` column (issue 38 #4: accepted is not delivered, and the report says which):
 * an email job's report adds the delivery state SES's events recorded on each task; call and LINE
 * reports keep their columns, byte for byte.
 */
import { describe, expect, it } from 'vitest';
import type { ReportEntry } from '#shared/csv/report.ts';
import type { JobChannel, Task } from '#shared/jobs/model.ts';
import { JOB_REPORT_HEADER, jobReportCsv } from '#shared/jobs/report.ts';

async function* from<T>(items: readonly T[]): AsyncGenerator<T> {
  yield* items;
}

async function csv(tasks: readonly Task[], entries: readonly ReportEntry[], channel?: JobChannel) {
  const chunks: Uint8Array[] = [];
  for await (const chunk of jobReportCsv(from(entries), from(tasks), channel ? { channel } : undefined))
    chunks.push(chunk);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/^\ufeff/, '')
    .trimEnd()
    .split('\r\n');
}

const task = (row: number, recipient: string, extra: Partial<Task> = {}): Task => ({
  clientId: 'acme',
  jobId: 'job-1',
  taskId: `task-${row}`,
  row,
  channel: 'message',
  recipient,
  variables: {},
  state: 'completed',
  attempts: 1,
  readyAt: 0,
  lastResult: 'accepted',
  updatedAt: 0,
  ...extra,
});

const skipped: ReportEntry = { row: 4, outcome: 'skipped', code: 'suppressed', reason: 'suppressed: bounce' };

describe("an email job's report", () => {
  it('adds the email column: the state the events recorded, empty before any', async () => {
    const lines = await csv(
      [
        task(2, 'taro@example.com', { emailState: 'delivered' }),
        task(3, 'bounce@simulator.amazonses.com', { emailState: 'bounced' }),
        task(5, 'hanako@example.com'),
      ],
      [skipped],
      'email',
    );
    expect(lines).toEqual([
      [...JOB_REPORT_HEADER, 'email'].join(','),
      '4,,skipped,0,,suppressed: bounce,,,',
      '2,taro@example.com,completed,1,accepted,,,,delivered',
      '3,bounce@simulator.amazonses.com,completed,1,accepted,,,,bounced',
      '5,hanako@example.com,completed,1,accepted,,,,',
    ]);
  });
});

describe('call and LINE reports', () => {
  it.each([['call'], ['line'], [undefined]] as const)('%s: the columns as before', async (channel) => {
    const lines = await csv([task(2, '+81312345678')], [skipped], channel);
    expect(lines).toEqual([
      JOB_REPORT_HEADER.join(','),
      '4,,skipped,0,,suppressed: bounce,,',
      "2,'+81312345678,completed,1,accepted,,,",
    ]);
  });
});
