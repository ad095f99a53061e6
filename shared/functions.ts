/**
 * The Lambda functions' settings, shared by `cdk/` (what is deployed) and `local/` (how the local
 * cloud invokes the same handlers): entry module, timeout, memory and, for queue consumers, the
 * event source mapping.
 */
import type { QueueId } from './resources.ts';

export type FunctionId = 'webhook-receiver' | 'webhook-processor' | 'job-manager' | 'call-status';

export interface FunctionSpec {
  readonly id: FunctionId;
  /** The module exporting `handler`, relative to the repository root. */
  readonly entry: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** For SQS consumers: the queue and the event source mapping's settings. */
  readonly queueSource?: {
    readonly queue: QueueId;
    readonly batchSize: number;
    readonly maxBatchingWindowSeconds?: number;
    /** Lambda's maximum concurrency for the mapping (2-1000). */
    readonly maxConcurrency: number;
  };
}

export const functions: Readonly<Record<FunctionId, FunctionSpec>> = {
  'webhook-receiver': {
    id: 'webhook-receiver',
    entry: 'lambdas/webhook-receiver/main.ts',
    // LINE waits 2 s; the timeout only bounds a stuck invocation.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
  'webhook-processor': {
    id: 'webhook-processor',
    entry: 'lambdas/webhook-processor/main.ts',
    // The queue's visibility timeout (60 s) is six times this, as AWS advises for SQS sources.
    timeoutSeconds: 10,
    memoryMb: 512,
    queueSource: { queue: 'webhook-events', batchSize: 10, maxConcurrency: 20 },
  },
  'job-manager': {
    id: 'job-manager',
    entry: 'lambdas/job-manager/main.ts',
    // Runs every minute: it must end well within one, so two runs rarely overlap (they may).
    timeoutSeconds: 50,
    memoryMb: 512,
  },
  'call-status': {
    id: 'call-status',
    entry: 'lambdas/call-status/main.ts',
    // Provider callbacks: a few DynamoDB writes and a best-effort nudge to the broker.
    timeoutSeconds: 10,
    memoryMb: 512,
  },
};
