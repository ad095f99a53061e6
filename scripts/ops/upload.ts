/**
 * PUTs a list to its presigned S3 URL, streamed from disk, reporting the bytes sent. S3 takes a
 * single PUT of up to 5 GB with its length declared (no chunked encoding), which node:http gives
 * here; the URL itself is a credential for 15 minutes: errors name its host, never its query.
 */
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { uploadTooLargeReason } from '#shared/jobs/upload-limit.ts';
import { NetworkError, OpsError, UsageError } from './errors.ts';

/**
 * The size of a list to upload; a usage error when it is not a readable file, or larger than the
 * ingest reads (said in the ingest's words, before a job is created).
 */
export function listSize(file: string): number {
  let size: number;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) throw new UsageError(`--csv: ${file} is not a file`);
    size = stat.size;
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`--csv: cannot read ${file}${code === 'ENOENT' ? ': no such file' : ` (${code})`}`);
  }
  if (size === 0) throw new UsageError(`--csv: ${file} is empty`);
  const tooLarge = uploadTooLargeReason(size);
  if (tooLarge) throw new UsageError(`--csv: ${file}: ${tooLarge}`);
  return size;
}

/** S3's error code and message from its XML answer, if any. */
export function s3ErrorOf(xml: string): string | undefined {
  const code = /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(xml)?.[1];
  return code ? `${code}${message ? `: ${message}` : ''}` : undefined;
}

/** Uploads `file` (of `size` bytes) to the presigned `url`; `onProgress` hears the bytes sent so far. */
export function uploadFile(
  url: string,
  file: string,
  size: number,
  onProgress: (sent: number) => void,
): Promise<void> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise<void>((resolve, reject) => {
    let sent = 0;
    const request = client.request(target, { method: 'PUT', headers: { 'content-length': String(size) } });
    const source = createReadStream(file);
    source.on('data', (chunk) => {
      sent += chunk.length;
      onProgress(sent);
    });
    source.on('error', (error) => {
      request.destroy();
      reject(
        new OpsError(`reading ${file} failed: ${(error as NodeJS.ErrnoException).code ?? error.message}`),
      );
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      source.destroy();
      reject(new NetworkError(`uploading to ${target.origin} failed: ${error.code ?? error.message}`));
    });
    request.on('response', (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (c: string) => {
        if (body.length < 4096) body += c;
      });
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve();
        else {
          source.destroy();
          reject(
            new OpsError(`S3 refused the upload: ${status}${s3ErrorOf(body) ? ` ${s3ErrorOf(body)}` : ''}`),
          );
        }
      });
    });
    source.pipe(request);
  });
}
