/**
 * A queue-consuming function on the local cloud, wired as deployed: its SQS event source mapping
 * (`./sqs-poller.ts`: batch size and window from `shared/functions.ts`, partial batch failures) and
 * a tracker of the messages sent to the queue that the handler has yet to record, so a test or the
 * demo waits for "everything published so far is recorded" rather than sleeping. Email's events
 * (`./email-wiring.ts`) and SMS's events and inbound texts (`./sms-wiring.ts`) use it.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { type FunctionId, functions } from '#shared/functions.ts';
import type { LocalCloudInfo } from './cloud.ts';
import type { Handler } from './lambda.ts';
import { type SqsPoller, startSqsPoller } from './sqs-poller.ts';

/** The queue's messages the handler has yet to record: a batch's failed records stay outstanding (SQS gives them back). */
export class RecordedEvents {
  readonly handler: Handler<SQSEvent, unknown>;
  readonly #outstanding = new Set<string>();
  /** Recorded before `queued` heard of them (the poller can be that quick). */
  readonly #early = new Set<string>();
  #waiters: (() => void)[] = [];

  constructor(inner: Handler<SQSEvent, unknown>) {
    this.handler = async (event, context) => {
      const response = (await inner(event, context)) as SQSBatchResponse | undefined;
      const failed = new Set(response?.batchItemFailures.map((f) => f.itemIdentifier) ?? []);
      for (const { messageId } of event.Records) {
        if (failed.has(messageId)) continue;
        if (!this.#outstanding.delete(messageId)) this.#early.add(messageId);
      }
      this.#wake();
      return response;
    };
  }

  queued(messageId: string): void {
    if (!this.#early.delete(messageId)) this.#outstanding.add(messageId);
  }

  drained(): Promise<void> {
    if (this.#outstanding.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #wake(): void {
    if (this.#outstanding.size > 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** The function `id`'s SQS event source mapping on its spec's queue, as `shared/functions.ts` sets it. */
export function startQueueMapping(
  cloud: LocalCloudInfo,
  sqs: SQSClient,
  id: FunctionId,
  handler: Handler<SQSEvent, unknown>,
  log: (line: string) => void,
): SqsPoller {
  const spec = functions[id];
  const source = spec.queueSource;
  if (!source) throw new Error(`${id} reads no queue`);
  const queue = cloud.queues[source.queue]!;
  return startSqsPoller({
    sqs,
    queueUrl: queue.url,
    queueArn: queue.arn,
    functionName: spec.id,
    handler,
    functionTimeoutMs: spec.timeoutSeconds * 1000,
    batchSize: source.batchSize,
    ...(source.maxBatchingWindowSeconds === undefined
      ? {}
      : { maxBatchingWindowMs: source.maxBatchingWindowSeconds * 1000 }),
    region: cloud.region,
    onError: (error) => log(`${id}: ${(error as Error).message}`),
  });
}
