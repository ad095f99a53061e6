/**
 * The uploads bucket: presigned upload URLs, streamed reads (ranged, pinned to an ETag), small
 * state objects (duplicate-filter snapshots, sidecars) and the jobs' validation reports, stored
 * one object per page of entries, keyed by the page's first row so that storing a page again
 * after a crash replaces it.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { ReportEntry } from '#shared/csv/report.ts';
import { SourceChangedError } from '#shared/jobs/errors.ts';
import type { UploadFiles, ValidationReportStore } from '#shared/jobs/ports.ts';

/** Parts of a multipart write (S3's minimum part is 5 MiB). */
const PART_BYTES = 8 * 1024 * 1024;

function status(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function isMissing(error: unknown): boolean {
  const name = (error as Error)?.name;
  return name === 'NoSuchKey' || name === 'NotFound' || status(error) === 404;
}

/**
 * The uploads bucket. `presigner` signs the URLs handed to browsers and must not add a checksum to
 * them (`makeS3PresignClient`): a presigned PUT carrying the SDK's default checksum of an empty
 * body is refused by S3 for any real file. It defaults to `s3` for reads-only uses and tests.
 */
export class S3UploadFiles implements UploadFiles {
  readonly #s3: S3Client;
  readonly #bucket: string;
  readonly #presigner: S3Client;

  constructor(s3: S3Client, bucket: string, presigner: S3Client = s3) {
    this.#s3 = s3;
    this.#bucket = bucket;
    this.#presigner = presigner;
  }

  presignPut(key: string, expiresIn: number): Promise<string> {
    return getSignedUrl(this.#presigner, new PutObjectCommand({ Bucket: this.#bucket, Key: key }), {
      expiresIn,
    });
  }

  presignGet(key: string, expiresIn: number): Promise<string> {
    return getSignedUrl(this.#presigner, new GetObjectCommand({ Bucket: this.#bucket, Key: key }), {
      expiresIn,
    });
  }

  async put(key: string, body: Uint8Array, contentType: string): Promise<void> {
    await this.#s3.send(
      new PutObjectCommand({ Bucket: this.#bucket, Key: key, Body: body, ContentType: contentType }),
    );
  }

  async *read(
    key: string,
    options: { readonly fromByte?: number; readonly eTag?: string } = {},
  ): AsyncIterable<Uint8Array> {
    const fromByte = options.fromByte ?? 0;
    let body: AsyncIterable<Uint8Array>;
    try {
      const out = await this.#s3.send(
        new GetObjectCommand({
          Bucket: this.#bucket,
          Key: key,
          ...(fromByte > 0 ? { Range: `bytes=${fromByte}-` } : {}),
          ...(options.eTag ? { IfMatch: `"${options.eTag}"` } : {}),
        }),
      );
      body = out.Body as unknown as AsyncIterable<Uint8Array>;
    } catch (error) {
      if (status(error) === 412 || (error as Error)?.name === 'PreconditionFailed') {
        throw new SourceChangedError(`${key} is no longer the uploaded version`, { cause: error });
      }
      // Nothing left past the offset.
      if (status(error) === 416) return;
      throw error;
    }
    yield* body;
  }

  async readJson(key: string): Promise<unknown> {
    const bytes = await this.getBytes(key);
    return bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString('utf8'));
  }

  async getBytes(key: string): Promise<Uint8Array | undefined> {
    try {
      const out = await this.#s3.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      return await out.Body!.transformToByteArray();
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  write(key: string, chunks: AsyncIterable<Uint8Array>, contentType: string): Promise<void> {
    return new S3ObjectWrite(this.#s3, this.#bucket, key, contentType).write(chunks);
  }
}

/**
 * One object written from a stream of chunks: one PUT when it is smaller than a part, else a
 * multipart upload of {@link PART_BYTES} parts, aborted if anything fails.
 */
class S3ObjectWrite {
  readonly #s3: S3Client;
  readonly #bucket: string;
  readonly #key: string;
  readonly #contentType: string;
  #buffered: Buffer[] = [];
  #size = 0;
  #uploadId: string | undefined;
  readonly #parts: { ETag: string; PartNumber: number }[] = [];

  constructor(s3: S3Client, bucket: string, key: string, contentType: string) {
    this.#s3 = s3;
    this.#bucket = bucket;
    this.#key = key;
    this.#contentType = contentType;
  }

  async write(chunks: AsyncIterable<Uint8Array>): Promise<void> {
    try {
      for await (const chunk of chunks) {
        this.#buffered.push(Buffer.from(chunk));
        this.#size += chunk.byteLength;
        if (this.#size >= PART_BYTES) await this.#sendPart();
      }
      if (this.#uploadId === undefined) {
        await this.#putWhole();
        return;
      }
      if (this.#size > 0) await this.#sendPart();
      await this.#complete(this.#uploadId);
    } catch (error) {
      if (this.#uploadId) await this.#abort(this.#uploadId);
      throw error;
    }
  }

  async #sendPart(): Promise<void> {
    this.#uploadId ??= (
      await this.#s3.send(
        new CreateMultipartUploadCommand({
          Bucket: this.#bucket,
          Key: this.#key,
          ContentType: this.#contentType,
        }),
      )
    ).UploadId!;
    const PartNumber = this.#parts.length + 1;
    const out = await this.#s3.send(
      new UploadPartCommand({
        Bucket: this.#bucket,
        Key: this.#key,
        UploadId: this.#uploadId,
        PartNumber,
        Body: Buffer.concat(this.#buffered),
      }),
    );
    this.#parts.push({ ETag: out.ETag!, PartNumber });
    this.#buffered = [];
    this.#size = 0;
  }

  async #putWhole(): Promise<void> {
    await this.#s3.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: this.#key,
        Body: Buffer.concat(this.#buffered),
        ContentType: this.#contentType,
      }),
    );
  }

  async #complete(uploadId: string): Promise<void> {
    await this.#s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: this.#bucket,
        Key: this.#key,
        UploadId: uploadId,
        MultipartUpload: { Parts: this.#parts },
      }),
    );
  }

  async #abort(uploadId: string): Promise<void> {
    await this.#s3
      .send(new AbortMultipartUploadCommand({ Bucket: this.#bucket, Key: this.#key, UploadId: uploadId }))
      .catch(() => {});
  }
}

/** Where a job's validation report pages are. */
export function validationReportPrefix(clientId: string, jobId: string): string {
  return `reports/${clientId}/${jobId}/validation/`;
}

/** A job's validation report in the uploads bucket: a JSON object a page, named by its first row. */
export class S3ValidationReportStore implements ValidationReportStore {
  readonly #s3: S3Client;
  readonly #bucket: string;

  constructor(s3: S3Client, bucket: string) {
    this.#s3 = s3;
    this.#bucket = bucket;
  }

  async putPage(clientId: string, jobId: string, entries: readonly ReportEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const key = `${validationReportPrefix(clientId, jobId)}${String(entries[0]!.row).padStart(10, '0')}.json`;
    await this.#s3.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: key,
        Body: JSON.stringify(entries),
        ContentType: 'application/json',
      }),
    );
  }

  async *entries(clientId: string, jobId: string): AsyncIterable<ReportEntry> {
    let token: string | undefined;
    do {
      const out: ListObjectsV2CommandOutput = await this.#s3.send(
        new ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: validationReportPrefix(clientId, jobId),
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      // Zero-padded first rows: key order is row order.
      const keys = (out.Contents ?? []).map((o) => o.Key!).sort();
      for (const key of keys) {
        const page = await this.#s3.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
        yield* JSON.parse(await page.Body!.transformToString('utf8')) as ReportEntry[];
      }
      token = out.NextContinuationToken;
    } while (token);
  }
}
