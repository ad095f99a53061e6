import { readFileSync } from 'node:fs';
import type { ScheduledEvent } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { type Scheduler, startScheduler } from '#local/scheduler.ts';

const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/fleet/scheduled-event.json', import.meta.url), 'utf8'),
) as ScheduledEvent;

let scheduler: Scheduler<unknown> | undefined;
afterEach(async () => {
  await scheduler?.stop();
  scheduler = undefined;
});

describe('the local EventBridge schedule', () => {
  it('invokes the handler with a scheduled event shaped like the real one, on every tick', async () => {
    const events: ScheduledEvent[] = [];
    let enough: () => void = () => {};
    const threeRuns = new Promise<void>((resolve) => {
      enough = resolve;
    });
    scheduler = startScheduler({
      intervalMs: 20,
      handler: async (event: ScheduledEvent) => {
        events.push(event);
        if (events.length === 3) enough();
        return events.length;
      },
    });

    await threeRuns;

    for (const event of events) {
      expect(Object.keys(event).sort()).toEqual(Object.keys(fixture).sort());
      expect(event).toMatchObject({ 'detail-type': 'Scheduled Event', source: 'aws.events', detail: {} });
      expect(event.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(event.resources[0]).toMatch(/^arn:aws:events:[a-z0-9-]+:\d{12}:rule\//);
    }
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  });

  it('reports failed runs and keeps ticking; stop waits for the run in progress', async () => {
    const errors: unknown[] = [];
    let finished = 0;
    // The second run is held until the test lets it end: after stop() was called.
    let letSecondEnd: () => void = () => {};
    const secondMayEnd = new Promise<void>((resolve) => {
      letSecondEnd = resolve;
    });
    scheduler = startScheduler({
      intervalMs: 60_000,
      runAtStart: false,
      handler: async () => {
        if (finished === 1) await secondMayEnd;
        finished += 1;
        if (finished === 1) throw new Error('table unavailable');
        return 'ok';
      },
      onError: (error) => errors.push(error),
    });

    await expect(scheduler.tick()).rejects.toThrow('table unavailable');
    const second = scheduler.tick();
    const stopped = scheduler.stop();
    // A turn of the event loop later, the run in progress ends: a stop that did not wait for it
    // would have resolved by then.
    setImmediate(letSecondEnd);
    await stopped;

    expect(finished).toBe(2);
    await expect(second).resolves.toBe('ok');
    expect(errors).toHaveLength(1);
    expect(scheduler.runs).toBe(2);
  });
});
