/**
 * S3 event notifications for uploaded lists, as S3 delivers them to the ingest queue: which
 * object arrived, and which job it belongs to. Keys arrive URL-encoded, with `+` for a space.
 *
 * - `uploads/{clientId}/{jobId}.csv`: the file of a job created through the API (presigned PUT
 *   or inline upload).
 * - `incoming/{clientId}/….csv`: a file dropped straight into the bucket; it creates a job, with
 *   the options of a sidecar `….json` next to it when there is one (upload the sidecar first).
 */
import { createHash } from 'node:crypto';
import { isUlid } from '#shared/ids.ts';
import { JobError } from './errors.ts';

export interface UploadedObject {
  readonly bucket: string;
  /** The object key, decoded. */
  readonly key: string;
  /** Without quotes. */
  readonly eTag: string;
  readonly size: number;
  readonly sequencer?: string;
  /** Epoch ms of the event (`eventTime`): the same for every delivery of one event. */
  readonly eventTime: number;
}

export type UploadTarget =
  | { readonly kind: 'upload'; readonly clientId: string; readonly jobId: string }
  | {
      readonly kind: 'drop';
      readonly clientId: string;
      readonly fileName: string;
      readonly sidecarKey: string;
    };

export class MalformedS3EventError extends JobError {}

/** Decodes an S3 event key: form-encoded, so `+` is a space and `%2B` a plus. */
export function decodeS3Key(key: string): string {
  try {
    return decodeURIComponent(key.replaceAll('+', ' '));
  } catch (error) {
    throw new MalformedS3EventError(`object key is not URL-encoded: ${JSON.stringify(key)}`, {
      cause: error,
    });
  }
}

interface S3EventRecordJson {
  eventName?: unknown;
  eventTime?: unknown;
  s3?: {
    bucket?: { name?: unknown };
    object?: { key?: unknown; eTag?: unknown; size?: unknown; sequencer?: unknown };
  };
}

/**
 * The created objects of an S3 event notification (an SQS message body). S3's `s3:TestEvent`,
 * sent when a notification is configured, has none. Throws {@link MalformedS3EventError} when
 * the body is not an S3 event.
 */
export function parseS3Event(body: unknown): UploadedObject[] {
  if (typeof body !== 'object' || body === null) throw new MalformedS3EventError('not an S3 event');
  if ((body as { Event?: unknown }).Event === 's3:TestEvent') return [];
  const records = (body as { Records?: unknown }).Records;
  if (!Array.isArray(records)) throw new MalformedS3EventError('not an S3 event: no Records');
  const objects: UploadedObject[] = [];
  for (const record of records as S3EventRecordJson[]) {
    if (typeof record?.eventName !== 'string' || !record.eventName.startsWith('ObjectCreated:')) continue;
    const bucket = record.s3?.bucket?.name;
    const key = record.s3?.object?.key;
    const eTag = record.s3?.object?.eTag;
    if (typeof bucket !== 'string' || typeof key !== 'string' || typeof eTag !== 'string') {
      throw new MalformedS3EventError('S3 event record without bucket name, object key or eTag');
    }
    const eventTime = typeof record.eventTime === 'string' ? Date.parse(record.eventTime) : Number.NaN;
    if (!Number.isFinite(eventTime)) throw new MalformedS3EventError('S3 event record without eventTime');
    const size = Number(record.s3?.object?.size ?? 0);
    const sequencer = record.s3?.object?.sequencer;
    objects.push({
      bucket,
      key: decodeS3Key(key),
      eTag: eTag.replaceAll('"', ''),
      size: Number.isFinite(size) ? size : 0,
      ...(typeof sequencer === 'string' ? { sequencer } : {}),
      eventTime,
    });
  }
  return objects;
}

/** Which job an object is for, or undefined when it is not an upload Switchboard reads. */
export function uploadTarget(key: string): UploadTarget | undefined {
  const upload = /^uploads\/([A-Za-z0-9_-]{1,64})\/([0-9A-HJKMNP-TV-Z]{26})\.csv$/.exec(key);
  if (upload && isUlid(upload[2]!)) return { kind: 'upload', clientId: upload[1]!, jobId: upload[2]! };
  const drop = /^incoming\/([A-Za-z0-9_-]{1,64})\/(.+)\.csv$/i.exec(key);
  if (drop) {
    const base = key.slice(0, -'.csv'.length);
    return { kind: 'drop', clientId: drop[1]!, fileName: drop[2]!, sidecarKey: `${base}.json` };
  }
  return undefined;
}

/** The key a job's file is uploaded to. */
export function uploadKey(clientId: string, jobId: string): string {
  return `uploads/${clientId}/${jobId}.csv`;
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The job id of a dropped file: a ULID whose time is the event's and whose other 80 bits hash
 * bucket, key and ETag. Every delivery of one S3 event carries the same `eventTime`, so a
 * redelivered notification names the same job, which a conditional put then creates only once.
 * The time is cut to whole seconds, the precision every source of it (the event, a listing, a
 * HEAD's Last-Modified) agrees on.
 */
export function dropJobId(object: Pick<UploadedObject, 'bucket' | 'key' | 'eTag' | 'eventTime'>): string {
  const hash = createHash('sha256').update(`${object.bucket}\n${object.key}\n${object.eTag}`).digest();
  let time = '';
  // Whole seconds: every source of the time (event, listing, HEAD) agrees on those.
  let t = Math.floor(object.eventTime / 1000) * 1000;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  let r = BigInt(`0x${hash.subarray(0, 10).toString('hex')}`);
  let tail = '';
  for (let i = 0; i < 16; i++) {
    tail = CROCKFORD[Number(r & 31n)]! + tail;
    r >>= 5n;
  }
  return time + tail;
}
