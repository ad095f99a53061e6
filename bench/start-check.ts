/**
 * The cost of the start check (`mayStartNow`: job end, pause, calling hours, restricted periods and
 * holidays), per start, with restricted periods switched off and on, side by side. The broker asks
 * it before every start (and once per task it looks at), so its cost is per start, not per job.
 */
import { performance } from 'node:perf_hooks';
import type { ClientSettings, Job } from '#shared/jobs/model.ts';
import { mayStartNow } from '#shared/jobs/restrictions.ts';
import { freshCounts } from './lib/seed-job.ts';

export interface StartCheckFigures {
  readonly offNsPerStart: number;
  readonly onNsPerStart: number;
  readonly ratio: number;
  readonly starts: number;
}

const HOURS = {
  timeZone: 'Asia/Tokyo',
  weekly: Object.fromEntries(
    ['mon', 'tue', 'wed', 'thu', 'fri', 'sat'].map((d) => [d, [{ start: '09:00', end: '20:00' }]]),
  ),
};

const BASE_CLIENT: ClientSettings = {
  clientId: 'bench',
  maxConcurrentCalls: 6,
  callsPerSecond: 2,
  timeZone: 'Asia/Tokyo',
  callingHours: HOURS,
  defaultRegion: 'JP',
  updatedAt: 0,
};

const BASE_JOB: Job = {
  clientId: 'bench',
  jobId: '01BENCH0000000000000000000',
  name: 'bench',
  channel: 'call',
  scenarioId: 's',
  startAt: 0,
  maxAttempts: 1,
  retryDelaySeconds: 60,
  status: 'running',
  counts: freshCounts(0),
  createdAt: 0,
  updatedAt: 0,
};

/** 20 client periods over the year, Japan's public holidays, and 5 periods of the job. */
function restricted(): { client: ClientSettings; job: Job } {
  const day = (n: number) => new Date(Date.UTC(2026, 0, 1 + n)).toISOString().slice(0, 10);
  return {
    client: {
      ...BASE_CLIENT,
      restrictedPeriods: Array.from({ length: 20 }, (_, i) => ({ start: day(i * 18), end: day(i * 18 + 1) })),
      holidays: { country: 'JP' },
    },
    job: {
      ...BASE_JOB,
      restrictedPeriods: Array.from({ length: 5 }, (_, i) => ({
        start: `${day(i * 60 + 5)}T12:00`,
        end: `${day(i * 60 + 5)}T13:00`,
      })),
    },
  };
}

/** ns per check over `starts` starts spread over 2026 (every holiday and period is met), from 1 January. */
function timePerStart(client: ClientSettings, job: Job, starts: number): number {
  const from = Date.UTC(2026, 0, 1);
  let allowed = 0;
  const began = performance.now();
  const step = Math.floor((365 * 86_400_000) / starts);
  for (let i = 0; i < starts; i++) if (mayStartNow(client, job, from + i * step)) allowed++;
  const ns = ((performance.now() - began) * 1e6) / starts;
  if (allowed === 0) throw new Error('the bench timeline never opened');
  return ns;
}

/** Measures both, warm (each once before, so compiled hours and holiday years are cached). */
export function measureStartCheck(starts = 400_000): StartCheckFigures {
  const on = restricted();
  timePerStart(BASE_CLIENT, BASE_JOB, starts);
  timePerStart(on.client, on.job, starts);
  const offNsPerStart = timePerStart(BASE_CLIENT, BASE_JOB, starts);
  const onNsPerStart = timePerStart(on.client, on.job, starts);
  return { offNsPerStart, onNsPerStart, ratio: onNsPerStart / offNsPerStart, starts };
}

export function startCheckLine(f: StartCheckFigures): string {
  const us = (ns: number) => (ns / 1000).toFixed(2);
  return (
    `start check per start (${f.starts.toLocaleString('en-US')} starts spread over a year): ` +
    `restricted periods off ${us(f.offNsPerStart)} µs, on (25 periods + JP holidays) ${us(f.onNsPerStart)} µs, ×${f.ratio.toFixed(2)}`
  );
}
