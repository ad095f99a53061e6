/**
 * The DynamoDB Streams event source mapping, locally: reads a table's stream from DynamoDB Local
 * (which serves the Streams API on its own port) and invokes a stream-triggered handler with batches
 * the way Lambda does: records of each shard in order, filtered by the mapping's patterns, up to the
 * batch size or the batching window; a failed invocation is retried with the same batch, holding the
 * shard back, so order is kept. With the deployed mapping's `failureHandling`
 * (`STREAM_FAILURE_HANDLING`) it acts as Lambda does: a failed batch is split in two and each half
 * delivered on its own (a split consumes no retry), a batch is retried at most `retryAttempts` times
 * and a record older than `maxRecordAgeSeconds` is not sent, and a batch given up is described to
 * `onFailure` as Lambda describes it to the on-failure destination (per shard: its sequence range,
 * not the records) before the shard goes on. Without it, retried until it succeeds (Lambda's
 * default: until the record expires).
 *
 * No SDK client for DynamoDB Streams is a dependency of the project, so the few calls it makes are
 * sent as the Streams JSON protocol (`DynamoDBStreams_20120810.*`) over fetch; DynamoDB Local does
 * not check signatures, only that an Authorization header is present.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { matchesAnyFilter } from './event-filter.ts';
import { type Handler, invokeHandler } from './lambda.ts';

export interface StreamPollerOptions {
  readonly endpoint: string;
  readonly region: string;
  readonly tableName: string;
  readonly functionName: string;
  readonly handler: Handler<DynamoDBStreamEvent, unknown>;
  readonly functionTimeoutMs: number;
  readonly batchSize: number;
  readonly maxBatchingWindowMs: number;
  readonly filters: readonly Record<string, unknown>[];
  readonly onError?: (error: unknown) => void;
  /** The mapping's bisect, retry and age bounds (as deployed); absent: retry until it succeeds. */
  readonly failureHandling?: {
    readonly bisectBatchOnError: boolean;
    readonly retryAttempts: number;
    readonly maxRecordAgeSeconds: number;
  };
  /** The on-failure destination: told of each batch given up, one record per shard. */
  readonly onFailure?: (record: StreamFailureRecord) => Promise<void>;
  /** First wait before a retry, doubling to 5 s. Default 200 ms. */
  readonly retryBaseMs?: number;
}

/**
 * What Lambda sends to a stream mapping's on-failure destination (Lambda Developer Guide, "Retaining
 * discarded records for a DynamoDB event source"): metadata of the failed invocation and the batch's
 * place in the stream — not the records, which stay in the stream until 24 h after their write.
 */
export interface StreamFailureRecord {
  readonly requestContext: {
    readonly requestId: string;
    readonly functionArn: string;
    readonly condition: 'RetryAttemptsExhausted' | 'RecordAgeExceeded';
    readonly approximateInvokeCount: number;
  };
  readonly responseContext: { readonly statusCode: number; readonly functionError?: string };
  readonly version: '1.0';
  readonly timestamp: string;
  readonly DDBStreamBatchInfo: {
    readonly shardId: string;
    readonly startSequenceNumber: string;
    readonly endSequenceNumber: string;
    readonly approximateArrivalOfFirstRecord: string;
    readonly approximateArrivalOfLastRecord: string;
    readonly batchSize: number;
    readonly streamArn: string;
  };
}

export interface StreamPoller {
  /** `discarded`: records of batches given up to the on-failure destination. */
  stats(): { invocations: number; failedInvocations: number; records: number; discarded: number };
  stop(): Promise<void>;
}

const IDLE_MS = 100;

/** Starts reading the table's stream from its start (the table is new); `stop()` ends it. */
export function startStreamPoller(options: StreamPollerOptions): StreamPoller {
  const mapping = new StreamMapping(options);
  const loop = mapping.run();
  return {
    stats: () => mapping.stats(),
    stop: async () => {
      mapping.stop();
      await loop.catch(() => undefined);
    },
  };
}

class StreamMapping {
  readonly #options: StreamPollerOptions;
  readonly #counters = { invocations: 0, failedInvocations: 0, records: 0, discarded: 0 };
  /** A record's shard (event id → shard id), for the on-failure record. */
  readonly #shardOf = new Map<string, string>();
  /** Shard id → its next iterator (undefined once the shard is closed and read). */
  readonly #iterators = new Map<string, string | undefined>();
  /** Shard id → the last sequence number read from it (where a new iterator starts after). */
  readonly #lastRead = new Map<string, string>();
  #stopping = false;
  #streamArn: string | undefined;

  constructor(options: StreamPollerOptions) {
    this.#options = options;
  }

  stats() {
    return { ...this.#counters };
  }

  stop(): void {
    this.#stopping = true;
  }

  async run(): Promise<void> {
    while (!this.#stopping) {
      try {
        const records = await this.#gather();
        if (records.length === 0) await sleep(IDLE_MS);
        else await this.#invokeUntilDone(records);
        for (const r of records) this.#shardOf.delete(r.eventID!);
      } catch (error) {
        this.#options.onError?.(error);
        await sleep(500);
      }
    }
  }

  /** Reads every open shard until the batch is full or the window has passed. */
  async #gather(): Promise<DynamoDBRecord[]> {
    const { batchSize, maxBatchingWindowMs, filters } = this.#options;
    const deadline = Date.now() + maxBatchingWindowMs;
    const out: DynamoDBRecord[] = [];
    do {
      await this.#discoverShards();
      let read = 0;
      for (const [shardId, iterator] of this.#iterators) {
        if (!iterator || out.length >= batchSize) continue;
        const page = await this.#read(shardId, iterator, batchSize - out.length);
        for (const raw of (page.Records ?? []) as Record<string, unknown>[]) {
          read++;
          this.#lastRead.set(shardId, (raw.dynamodb as { SequenceNumber: string }).SequenceNumber);
          const record = this.#toLambdaRecord(raw);
          if (!matchesAnyFilter(record, filters)) continue;
          this.#shardOf.set(record.eventID!, shardId);
          out.push(record);
        }
      }
      if (out.length >= batchSize || (read === 0 && out.length > 0)) break;
      if (read === 0 && out.length === 0) break;
    } while (Date.now() < deadline && !this.#stopping);
    return out;
  }

  /**
   * One GetRecords. DynamoDB Local answers TrimmedDataAccessException to an iterator taken on a
   * shard that was empty then: a new iterator after the last record read (or from the start) fixes it.
   */
  async #read(shardId: string, iterator: string, limit: number): Promise<Record<string, unknown>> {
    try {
      const page = await this.#call('GetRecords', { ShardIterator: iterator, Limit: limit });
      this.#iterators.set(shardId, page.NextShardIterator as string | undefined);
      return page;
    } catch (error) {
      if (!/TrimmedDataAccessException|ExpiredIteratorException/.test(String((error as Error).message)))
        throw error;
      this.#iterators.set(shardId, await this.#iteratorFor(shardId));
      return { Records: [] };
    }
  }

  async #iteratorFor(shardId: string): Promise<string> {
    const last = this.#lastRead.get(shardId);
    const it = await this.#call('GetShardIterator', {
      StreamArn: this.#streamArn,
      ShardId: shardId,
      ...(last
        ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: last }
        : { ShardIteratorType: 'TRIM_HORIZON' }),
    });
    return it.ShardIterator as string;
  }

  async #discoverShards(): Promise<void> {
    if (!this.#streamArn) {
      const table = await this.#call(
        'DescribeTable',
        { TableName: this.#options.tableName },
        'DynamoDB_20120810',
      );
      this.#streamArn = (table.Table as { LatestStreamArn?: string }).LatestStreamArn;
      if (!this.#streamArn) throw new Error(`${this.#options.tableName} has no stream`);
    }
    const described = await this.#call('DescribeStream', { StreamArn: this.#streamArn });
    const shards = ((described.StreamDescription as { Shards?: { ShardId: string }[] }).Shards ?? []).map(
      (s) => s.ShardId,
    );
    for (const shardId of shards) {
      if (this.#iterators.has(shardId)) continue;
      this.#iterators.set(shardId, await this.#iteratorFor(shardId));
    }
  }

  #toLambdaRecord(raw: Record<string, unknown>): DynamoDBRecord {
    const dynamodb = raw.dynamodb as Record<string, unknown>;
    return {
      eventID: raw.eventID as string,
      eventName: raw.eventName as DynamoDBRecord['eventName'],
      eventVersion: '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: this.#options.region,
      eventSourceARN: this.#streamArn!,
      dynamodb: {
        ...(dynamodb as DynamoDBRecord['dynamodb']),
        ApproximateCreationDateTime: Number(dynamodb.ApproximateCreationDateTime ?? Date.now() / 1000),
      },
    };
  }

  /**
   * Delivers a batch as Lambda's mapping does (see the module comment): invoked until it succeeds,
   * split on error, given up to `onFailure` past the retries or the record age. `attempt` carries
   * over a split, which consumes no retry.
   */
  async #invokeUntilDone(records: DynamoDBRecord[], attempt = 0): Promise<void> {
    const bounds = this.#options.failureHandling;
    for (let tries = attempt; !this.#stopping; tries++) {
      if (bounds && oldestAgeSeconds(records) > bounds.maxRecordAgeSeconds)
        return this.#giveUp(records, 'RecordAgeExceeded', tries);
      if (await this.#invoke(records)) return;
      if (bounds?.bisectBatchOnError && records.length > 1) {
        const half = Math.ceil(records.length / 2);
        await this.#invokeUntilDone(records.slice(0, half), tries);
        await this.#invokeUntilDone(records.slice(half), tries);
        return;
      }
      if (bounds && tries >= bounds.retryAttempts)
        return this.#giveUp(records, 'RetryAttemptsExhausted', tries + 1);
      await sleep(Math.min(5_000, (this.#options.retryBaseMs ?? 200) * 2 ** tries));
    }
  }

  /** One invocation; false when the function failed. */
  async #invoke(records: DynamoDBRecord[]): Promise<boolean> {
    const { handler, functionName, functionTimeoutMs } = this.#options;
    this.#counters.invocations++;
    try {
      await invokeHandler(handler, { Records: records }, { functionName, timeoutMs: functionTimeoutMs });
      this.#counters.records += records.length;
      return true;
    } catch (error) {
      this.#counters.failedInvocations++;
      this.#options.onError?.(error);
      return false;
    }
  }

  /** Describes the batch to the on-failure destination, shard by shard, and lets the shard go on. */
  async #giveUp(
    records: DynamoDBRecord[],
    condition: StreamFailureRecord['requestContext']['condition'],
    invokes: number,
  ): Promise<void> {
    this.#counters.discarded += records.length;
    const byShard = Map.groupBy(records, (r) => this.#shardOf.get(r.eventID!) ?? 'unknown');
    for (const [shardId, shardRecords] of byShard)
      await this.#options.onFailure?.(this.#failureRecord(shardId, shardRecords, condition, invokes));
  }

  #failureRecord(
    shardId: string,
    records: DynamoDBRecord[],
    condition: StreamFailureRecord['requestContext']['condition'],
    invokes: number,
  ): StreamFailureRecord {
    const { region, functionName } = this.#options;
    const arrival = (r: DynamoDBRecord) =>
      new Date(Number(r.dynamodb?.ApproximateCreationDateTime ?? 0) * 1000).toISOString();
    return {
      requestContext: {
        requestId: randomUUID(),
        functionArn: `arn:aws:lambda:${region}:000000000000:function:${functionName}`,
        condition,
        approximateInvokeCount: invokes,
      },
      responseContext: { statusCode: 200, functionError: 'Unhandled' },
      version: '1.0',
      timestamp: new Date().toISOString(),
      DDBStreamBatchInfo: {
        shardId,
        startSequenceNumber: records[0]!.dynamodb!.SequenceNumber!,
        endSequenceNumber: records.at(-1)!.dynamodb!.SequenceNumber!,
        approximateArrivalOfFirstRecord: arrival(records[0]!),
        approximateArrivalOfLastRecord: arrival(records.at(-1)!),
        batchSize: records.length,
        streamArn: this.#streamArn!,
      },
    };
  }

  async #call(
    action: string,
    body: unknown,
    prefix = 'DynamoDBStreams_20120810',
  ): Promise<Record<string, unknown>> {
    const response = await fetch(this.#options.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': `${prefix}.${action}`,
        authorization: `AWS4-HMAC-SHA256 Credential=local/20250101/${this.#options.region}/dynamodb/aws4_request, SignedHeaders=host, Signature=0`,
      },
      body: JSON.stringify(body),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${action}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  }
}

/** Seconds since the oldest record of the batch was written. */
function oldestAgeSeconds(records: readonly DynamoDBRecord[]): number {
  const oldest = Math.min(...records.map((r) => Number(r.dynamodb?.ApproximateCreationDateTime ?? Infinity)));
  return Date.now() / 1000 - oldest;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
