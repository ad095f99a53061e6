/**
 * A broker's message session on the local cloud for adapter tests: the client's lease taken as
 * `owner`, a session of the DynamoDB message tasks under it, and claiming until enough is held.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { expect } from 'vitest';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import {
  DynamoMessageTaskStore,
  type DynamoMessageTasksOptions,
} from '#shared/adapters/dynamo-message-tasks.ts';
import type { ClaimedTask } from '#shared/campaign/ports.ts';
import type { Job } from '#shared/jobs/model.ts';

const HOUR = 3_600_000;

export interface HolderOptions {
  readonly tables: { readonly controlTable: string; readonly tasksTable: string };
  /** The lease store's client (the cloud's own). */
  readonly leaseDoc: DynamoDBDocumentClient;
  /** The session's client (a test adds its faults to it); the lease store's by default. */
  readonly doc?: DynamoDBDocumentClient;
  readonly optedOut?: DynamoMessageTasksOptions['optedOut'];
}

export type MessageHolder = Awaited<ReturnType<typeof messageHolder>>;

/** The client's lease taken as `owner` (for an hour), and a message session under it (holds of a minute). */
export async function messageHolder(job: Job, owner: string, now: () => number, options: HolderOptions) {
  const lease = await new DynamoLeaseStore(options.leaseDoc, options.tables.controlTable).tryTake({
    clientId: job.clientId,
    owner,
    now: now(),
    leaseMs: HOUR,
  });
  expect(lease, `${owner} takes the lease`).toBeDefined();
  const store = new DynamoMessageTaskStore(options.doc ?? options.leaseDoc, {
    ...options.tables,
    clock: { now },
    holdMs: 60_000,
    ...(options.optedOut ? { optedOut: options.optedOut } : {}),
  });
  return store.session({ clientId: job.clientId, owner, token: () => lease!.token });
}

/** Claims until `n` tasks are held (the index is read shard by shard, eventually consistent). */
export async function claimAll(session: MessageHolder, n: number): Promise<ClaimedTask[]> {
  const claimed: ClaimedTask[] = [];
  for (let round = 0; claimed.length < n && round < 50; round++) {
    claimed.push(...(await session.source.nextPage(Math.max(1, n - claimed.length))));
  }
  return claimed;
}
