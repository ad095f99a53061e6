/**
 * S3 event notifications, locally: fauxqs has none, so this polls the uploads bucket
 * (ListObjectsV2 on each watched prefix, every ~250 ms) and, for every new object — new key, or
 * a new ETag for a known key — sends the ingest queue the message S3 would send: the real S3
 * event JSON, key URL-encoded with `+` for spaces. The same ingest Lambda then runs as in AWS.
 * Like the deployed notification (`UPLOAD_NOTIFICATIONS` in shared/resources.ts, the CDK app's
 * filters): only keys under `uploads/` and `incoming/` ending in `.csv` or `.CSV`.
 */
import { ListObjectsV2Command, type ListObjectsV2CommandOutput, type S3Client } from '@aws-sdk/client-s3';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { UPLOAD_NOTIFICATIONS } from '#shared/resources.ts';

export interface S3NotifierOptions {
  readonly s3: S3Client;
  readonly sqs: SQSClient;
  readonly bucket: string;
  readonly queueUrl: string;
  readonly region: string;
  /** Watched prefixes (the deployed notification's filters). */
  readonly prefixes?: readonly string[];
  readonly suffixes?: readonly string[];
  readonly intervalMs?: number;
  /** Also notify objects that exist when the notifier starts (S3 would not). */
  readonly notifyExisting?: boolean;
  readonly onError?: (error: unknown) => void;
}

export interface S3Notifier {
  /** Notifications sent so far. */
  sent(): number;
  /** Resolves after one more full poll (tests wait on it instead of sleeping). */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** S3's key encoding in event notifications: form-style, `+` for a space. */
export function encodeS3EventKey(key: string): string {
  return encodeURIComponent(key).replaceAll('%20', '+').replaceAll('%2F', '/');
}

/** The notification S3 sends for one created object. */
export function s3EventNotification(input: {
  readonly bucket: string;
  readonly key: string;
  readonly eTag: string;
  readonly size: number;
  readonly lastModified: Date;
  readonly region: string;
  readonly sequencer: string;
}): unknown {
  const eTag = input.eTag.replaceAll('"', '');
  return {
    Records: [
      {
        eventVersion: '2.1',
        eventSource: 'aws:s3',
        awsRegion: input.region,
        eventTime: input.lastModified.toISOString(),
        // A multipart upload's ETag ends in -<parts>.
        eventName: eTag.includes('-') ? 'ObjectCreated:CompleteMultipartUpload' : 'ObjectCreated:Put',
        userIdentity: { principalId: 'AWS:LOCAL' },
        requestParameters: { sourceIPAddress: '127.0.0.1' },
        responseElements: { 'x-amz-request-id': 'LOCAL', 'x-amz-id-2': 'local' },
        s3: {
          s3SchemaVersion: '1.0',
          configurationId: 'switchboard-uploads',
          bucket: {
            name: input.bucket,
            ownerIdentity: { principalId: 'LOCAL' },
            arn: `arn:aws:s3:::${input.bucket}`,
          },
          object: { key: encodeS3EventKey(input.key), size: input.size, eTag, sequencer: input.sequencer },
        },
      },
    ],
  };
}

/** Starts polling; `stop()` ends it. */
export async function startS3Notifier(options: S3NotifierOptions): Promise<S3Notifier> {
  const watcher = new BucketWatcher(options);
  await watcher.poll(options.notifyExisting ?? false);
  watcher.start();
  return {
    sent: () => watcher.sent,
    settled: () => watcher.settled(),
    stop: () => watcher.stop(),
  };
}

type ListedObject = NonNullable<ListObjectsV2CommandOutput['Contents']>[number];

/** Lists the watched prefixes and notifies each object not seen yet (or with a new ETag). */
class BucketWatcher {
  readonly #options: S3NotifierOptions;
  readonly #prefixes: readonly string[];
  readonly #suffixes: readonly string[];
  readonly #intervalMs: number;
  /** ETag by key, of every object seen. */
  readonly #seen = new Map<string, string>();
  #sent = 0;
  #sequence = 0;
  #stopping = false;
  #loop: Promise<void> = Promise.resolve();
  /** Woken after each poll of the loop. */
  #waiters: (() => void)[] = [];

  constructor(options: S3NotifierOptions) {
    this.#options = options;
    this.#prefixes = options.prefixes ?? UPLOAD_NOTIFICATIONS.prefixes;
    // Case-sensitive, as S3 matches a filter's suffix.
    this.#suffixes = options.suffixes ?? UPLOAD_NOTIFICATIONS.suffixes;
    this.#intervalMs = options.intervalMs ?? 250;
  }

  /** Notifications sent so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Polls every interval until stopped. */
  start(): void {
    this.#loop = this.#pollEvery();
  }

  async #pollEvery(): Promise<void> {
    while (!this.#stopping) {
      await new Promise((resolve) => setTimeout(resolve, this.#intervalMs));
      if (this.#stopping) break;
      try {
        await this.poll(true);
      } catch (error) {
        this.#options.onError?.(error);
      }
      const done = this.#waiters;
      this.#waiters = [];
      for (const wake of done) wake();
    }
  }

  /** Resolves after two more polls: the one in progress may have listed before the caller's upload. */
  settled(): Promise<void> {
    return new Promise<void>((resolve) => {
      let rounds = 0;
      const wait = () => {
        this.#waiters.push(() => (++rounds >= 2 ? resolve() : wait()));
      };
      wait();
    });
  }

  /** Ends the polling and releases whoever waits for a poll. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#loop;
    for (const wake of this.#waiters) wake();
  }

  /** One listing of every watched prefix; new objects are notified when `notify`, else only remembered. */
  async poll(notify: boolean): Promise<void> {
    for (const prefix of this.#prefixes) {
      let token: string | undefined;
      do {
        const out: ListObjectsV2CommandOutput = await this.#options.s3.send(
          new ListObjectsV2Command({
            Bucket: this.#options.bucket,
            Prefix: prefix,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
        for (const object of out.Contents ?? []) await this.#notice(object, notify);
        token = out.NextContinuationToken;
      } while (token);
    }
  }

  async #notice(object: ListedObject, notify: boolean): Promise<void> {
    const key = object.Key!;
    const eTag = (object.ETag ?? '').replaceAll('"', '');
    if (!this.#suffixes.some((suffix) => key.endsWith(suffix)) || this.#seen.get(key) === eTag) return;
    if (notify) await this.#notify(object, key, eTag);
    this.#seen.set(key, eTag);
  }

  /** Sends the ingest queue the event S3 would send for the object. */
  async #notify(object: ListedObject, key: string, eTag: string): Promise<void> {
    const options = this.#options;
    const body = s3EventNotification({
      bucket: options.bucket,
      key,
      eTag,
      size: object.Size ?? 0,
      lastModified: object.LastModified ?? new Date(),
      region: options.region,
      sequencer: (++this.#sequence).toString(16).toUpperCase().padStart(18, '0'),
    });
    await options.sqs.send(
      new SendMessageCommand({ QueueUrl: options.queueUrl, MessageBody: JSON.stringify(body) }),
    );
    this.#sent++;
  }
}
