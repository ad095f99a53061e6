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
export function makeS3UploadFiles(s3: S3Client, bucket: string, presigner: S3Client = s3): UploadFiles {
  async function getBytes(key: string): Promise<Uint8Array | undefined> {
    try {
      const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return await out.Body!.transformToByteArray();
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }
  return {
    presignPut: (key, expiresIn) =>
      getSignedUrl(presigner, new PutObjectCommand({ Bucket: bucket, Key: key }), { expiresIn }),
    presignGet: (key, expiresIn) =>
      getSignedUrl(presigner, new GetObjectCommand({ Bucket: bucket, Key: key }), { expiresIn }),
    async put(key, body, contentType) {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: contentType }));
    },
    async *read(key, options = {}) {
      const fromByte = options.fromByte ?? 0;
      let body: AsyncIterable<Uint8Array>;
      try {
        const out = await s3.send(
          new GetObjectCommand({
            Bucket: bucket,
            Key: key,
            ...(fromByte > 0 ? { Range: `bytes=${fromByte}-` } : {}),
            ...(options.eTag ? { IfMatch: `"${options.eTag}"` } : {}),
          }),
        );
        body = out.Body as unknown as AsyncIterable<Uint8Array>;
      } catch (error) {
        if (status(error) === 412 || (error as Error)?.name === 'PreconditionFailed') {
          throw new SourceChangedError(`${key} is no longer the uploaded version`);
        }
        // Nothing left past the offset.
        if (status(error) === 416) return;
        throw error;
      }
      yield* body;
    },
    async readJson(key) {
      const bytes = await getBytes(key);
      return bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString('utf8'));
    },
    getBytes,
    async write(key, chunks, contentType) {
      let buffered: Buffer[] = [];
      let size = 0;
      let uploadId: string | undefined;
      const parts: { ETag: string; PartNumber: number }[] = [];
      const sendPart = async () => {
        uploadId ??= (
          await s3.send(
            new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: contentType }),
          )
        ).UploadId!;
        const PartNumber = parts.length + 1;
        const out = await s3.send(
          new UploadPartCommand({
            Bucket: bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber,
            Body: Buffer.concat(buffered),
          }),
        );
        parts.push({ ETag: out.ETag!, PartNumber });
        buffered = [];
        size = 0;
      };
      try {
        for await (const chunk of chunks) {
          buffered.push(Buffer.from(chunk));
          size += chunk.byteLength;
          if (size >= PART_BYTES) await sendPart();
        }
        if (uploadId === undefined) {
          await s3.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: key,
              Body: Buffer.concat(buffered),
              ContentType: contentType,
            }),
          );
          return;
        }
        if (size > 0) await sendPart();
        await s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
          }),
        );
      } catch (error) {
        if (uploadId) {
          await s3
            .send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }))
            .catch(() => {});
        }
        throw error;
      }
    },
  };
}

/** Where a job's validation report pages are. */
export function validationReportPrefix(clientId: string, jobId: string): string {
  return `reports/${clientId}/${jobId}/validation/`;
}

export function makeS3ValidationReportStore(s3: S3Client, bucket: string): ValidationReportStore {
  return {
    async putPage(clientId, jobId, entries) {
      if (entries.length === 0) return;
      const key = `${validationReportPrefix(clientId, jobId)}${String(entries[0]!.row).padStart(10, '0')}.json`;
      await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: JSON.stringify(entries),
          ContentType: 'application/json',
        }),
      );
    },
    async *entries(clientId, jobId) {
      let token: string | undefined;
      do {
        const out: ListObjectsV2CommandOutput = await s3.send(
          new ListObjectsV2Command({
            Bucket: bucket,
            Prefix: validationReportPrefix(clientId, jobId),
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
        // Zero-padded first rows: key order is row order.
        const keys = (out.Contents ?? []).map((o) => o.Key!).sort();
        for (const key of keys) {
          const page = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
          yield* JSON.parse(await page.Body!.transformToString('utf8')) as ReportEntry[];
        }
        token = out.NextContinuationToken;
      } while (token);
    },
  };
}
