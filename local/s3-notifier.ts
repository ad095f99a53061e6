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
  const prefixes = options.prefixes ?? UPLOAD_NOTIFICATIONS.prefixes;
  // Case-sensitive, as S3 matches a filter's suffix.
  const suffixes = options.suffixes ?? UPLOAD_NOTIFICATIONS.suffixes;
  const intervalMs = options.intervalMs ?? 250;
  const seen = new Map<string, string>();
  let sent = 0;
  let sequence = 0;
  let stopping = false;
  let waiters: (() => void)[] = [];

  async function poll(notify: boolean): Promise<void> {
    for (const prefix of prefixes) {
      let token: string | undefined;
      do {
        const out: ListObjectsV2CommandOutput = await options.s3.send(
          new ListObjectsV2Command({
            Bucket: options.bucket,
            Prefix: prefix,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
        for (const object of out.Contents ?? []) {
          const key = object.Key!;
          const eTag = (object.ETag ?? '').replaceAll('"', '');
          if (!suffixes.some((suffix) => key.endsWith(suffix)) || seen.get(key) === eTag) continue;
          if (notify) {
            const body = s3EventNotification({
              bucket: options.bucket,
              key,
              eTag,
              size: object.Size ?? 0,
              lastModified: object.LastModified ?? new Date(),
              region: options.region,
              sequencer: (++sequence).toString(16).toUpperCase().padStart(18, '0'),
            });
            await options.sqs.send(
              new SendMessageCommand({ QueueUrl: options.queueUrl, MessageBody: JSON.stringify(body) }),
            );
            sent++;
          }
          seen.set(key, eTag);
        }
        token = out.NextContinuationToken;
      } while (token);
    }
  }

  await poll(options.notifyExisting ?? false);
  const loop = (async () => {
    while (!stopping) {
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
      if (stopping) break;
      try {
        await poll(true);
      } catch (error) {
        options.onError?.(error);
      }
      const done = waiters;
      waiters = [];
      for (const wake of done) wake();
    }
  })();
  return {
    sent: () => sent,
    settled: () =>
      new Promise<void>((resolve) => {
        // Two rounds: the one in progress may have listed before the caller's upload.
        let rounds = 0;
        const wait = () => {
          waiters.push(() => (++rounds >= 2 ? resolve() : wait()));
        };
        wait();
      }),
    stop: async () => {
      stopping = true;
      await loop;
      for (const wake of waiters) wake();
    },
  };
}
