import { describe, expect, it } from 'vitest';
import { dlqName, queueName, queueSpec, resourceName, TASK_SHARDS, tables } from '#shared/resources.ts';

describe('resource names', () => {
  it('prefixes with the stage and keeps .fifo last', () => {
    expect(resourceName('prod', 'control')).toBe('switchboard-prod-control');
    expect(queueName('prod', queueSpec('webhook-events'))).toBe('switchboard-prod-webhook-events.fifo');
    expect(dlqName('prod', queueSpec('webhook-events'))).toBe('switchboard-prod-webhook-events-dlq.fifo');
    expect(dlqName('prod', queueSpec('ingest'))).toBe('switchboard-prod-ingest-dlq');
  });

  it('refuses a stage that would make an invalid name', () => {
    expect(() => resourceName('Prod!', 'x')).toThrow(/stage must be/);
  });

  it('shards tasks so a million-task job stays within per-partition write limits', () => {
    expect(TASK_SHARDS * 1000).toBeGreaterThanOrEqual(10_000);
    expect(tables.map((t) => t.id).sort()).toEqual(['channels', 'control', 'events', 'tasks']);
  });
});
