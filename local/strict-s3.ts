/**
 * S3 as strict as S3, in front of fauxqs's S3 (which checks neither signatures nor checksums):
 * every request must carry a valid SigV4 signature, in the `Authorization` header or as a
 * presigned URL (signature over method, path and signed headers, expiry, credential scope); a
 * declared payload hash must match the body; on a PUT, the checksum S3 would verify —
 * `x-amz-checksum-{crc32,crc32c,sha1,sha256}` as a header, a presigned URL's query parameter or an
 * aws-chunked trailer, and `Content-MD5` — must match the bytes received, and an
 * `x-amz-sdk-checksum-algorithm` with no checksum is refused. What passes goes to fauxqs unchanged.
 *
 * So a presigned PUT URL that carries the checksum of an empty body (the SDK's default since its
 * 2025 checksum change) is refused here with S3's `BadDigest`, as S3 refuses it, and a browser's
 * plain `fetch` upload is tested for real. Errors are S3's XML.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import { LocalCloudError } from './errors.ts';
import { SigV4Error, verifySigV4 } from './sigv4.ts';

/** The largest object this stand-in takes in one PUT (S3 takes 5 GiB). */
export const MAX_BODY_BYTES = 256 * 1024 * 1024;

export interface StrictS3Options {
  /** fauxqs's endpoint (`http://127.0.0.1:port`). */
  readonly upstream: string;
  readonly region: string;
  /** Secret access keys by access key id. */
  readonly secrets: Readonly<Record<string, string>>;
  /** Largest body this stand-in buffers (it verifies whole bodies). Default 256 MiB. */
  readonly maxBodyBytes?: number;
  /** The buckets' CORS rule (as the stack sets it); without one, browsers' preflights are refused. */
  readonly cors?: CorsRule;
}

/** One S3 CORS rule: origins may hold one `*`, headers may end in `*`. */
export interface CorsRule {
  readonly allowedOrigins: readonly string[];
  readonly allowedMethods: readonly string[];
  readonly allowedHeaders: readonly string[];
  readonly exposedHeaders: readonly string[];
  readonly maxAgeSeconds: number;
}

function wildcardMatch(pattern: string, value: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern.toLowerCase() === value.toLowerCase();
  const head = pattern.slice(0, star).toLowerCase();
  const tail = pattern.slice(star + 1).toLowerCase();
  const v = value.toLowerCase();
  return v.length >= head.length + tail.length && v.startsWith(head) && v.endsWith(tail);
}

/**
 * S3's answer to a browser's request from another origin (S3 user guide, "Using cross-origin
 * resource sharing"): a preflight is 200 with the allowed method and headers when the rule admits
 * origin, method and every requested header, else 403; an actual request gets the
 * `access-control-*` headers only when the rule admits it.
 */
function corsHeaders(
  req: http.IncomingMessage,
  rule: CorsRule | undefined,
): Record<string, string> | undefined {
  const origin = req.headers.origin;
  if (!origin || !rule) return undefined;
  const preflight = req.method === 'OPTIONS';
  const method = preflight ? String(req.headers['access-control-request-method'] ?? '') : (req.method ?? '');
  const requested = preflight
    ? String(req.headers['access-control-request-headers'] ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean)
    : [];
  const admitted =
    rule.allowedOrigins.some((o) => wildcardMatch(o, origin)) &&
    rule.allowedMethods.includes(method.toUpperCase()) &&
    requested.every((h) => rule.allowedHeaders.some((a) => wildcardMatch(a, h)));
  if (!admitted) return undefined;
  return {
    'access-control-allow-origin': origin,
    'access-control-allow-methods': rule.allowedMethods.join(', '),
    ...(preflight ? { 'access-control-allow-headers': requested.join(', ') } : {}),
    'access-control-expose-headers': rule.exposedHeaders.join(', '),
    'access-control-max-age': String(rule.maxAgeSeconds),
    vary: 'Origin, Access-Control-Request-Headers, Access-Control-Request-Method',
  };
}

export interface StrictS3 {
  readonly url: string;
  /** Requests refused so far, by S3 error code. */
  readonly refused: ReadonlyMap<string, number>;
  stop(): Promise<void>;
}

class S3Refusal extends LocalCloudError {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
    this.code = code;
  }
}

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32c(data: Buffer): number {
  let c = 0xffffffff;
  for (const byte of data) c = CRC32C_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const uint32 = (value: number) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value >>> 0);
  return out.toString('base64');
};

/** S3's checksums, base64 as in the `x-amz-checksum-*` headers. */
const CHECKSUMS: Record<string, (body: Buffer) => string> = {
  crc32: (body) => uint32(crc32(body)),
  crc32c: (body) => uint32(crc32c(body)),
  sha1: (body) => createHash('sha1').update(body).digest('base64'),
  sha256: (body) => createHash('sha256').update(body).digest('base64'),
};

/** Decodes an aws-chunked body: the data, and its trailing headers. */
export function decodeAwsChunked(body: Buffer): { data: Buffer; trailers: Map<string, string> } {
  const parts: Buffer[] = [];
  const trailers = new Map<string, string>();
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd < 0)
      throw new S3Refusal(400, 'IncompleteBody', 'the aws-chunked body ends inside a chunk header');
    const size = Number.parseInt(body.subarray(at, lineEnd).toString('latin1').split(';')[0]!, 16);
    if (!Number.isFinite(size) || size < 0)
      throw new S3Refusal(400, 'InvalidChunkSizeError', 'a chunk size is not hex');
    at = lineEnd + 2;
    if (size === 0) break;
    parts.push(body.subarray(at, at + size));
    at += size + 2;
  }
  for (const line of body.subarray(at).toString('latin1').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) trailers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { data: Buffer.concat(parts), trailers };
}

function checkChecksums(headers: ReadonlyMap<string, string>, payload: Buffer, chunked: boolean): void {
  const { data, trailers } = chunked
    ? decodeAwsChunked(payload)
    : { data: payload, trailers: new Map<string, string>() };
  let declared = false;
  for (const [name, value] of [...headers, ...trailers]) {
    const m = /^x-amz-checksum-([a-z0-9]+)$/.exec(name);
    if (!m) continue;
    declared = true;
    const compute = CHECKSUMS[m[1]!];
    if (!compute)
      throw new S3Refusal(
        501,
        'NotImplemented',
        `the local S3 does not compute ${m[1]!.toUpperCase()} checksums`,
      );
    if (compute(data) !== value) {
      throw new S3Refusal(
        400,
        'BadDigest',
        `The ${m[1]!.toUpperCase()} you specified did not match the calculated checksum.`,
      );
    }
  }
  const algorithm = headers.get('x-amz-sdk-checksum-algorithm');
  if (algorithm && !declared && !headers.get('x-amz-trailer')) {
    throw new S3Refusal(
      400,
      'InvalidRequest',
      'x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.',
    );
  }
  const md5 = headers.get('content-md5');
  if (md5 !== undefined && createHash('md5').update(data).digest('base64') !== md5) {
    throw new S3Refusal(400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }
}

function errorXml(code: string, message: string): string {
  const xml = (s: string) => s.replace(/[<>&]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;' })[c]!);
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xml(message)}</Message><RequestId>local</RequestId></Error>`;
}

async function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > max) {
      throw new S3Refusal(
        400,
        'EntityTooLarge',
        `the local S3 stand-in takes bodies up to ${max} bytes (S3 itself takes 5 GiB in one PUT)`,
      );
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Checks a request as S3 would; throws an {@link S3Refusal}. */
function admit(req: http.IncomingMessage, body: Buffer, options: StrictS3Options): void {
  let verified: ReturnType<typeof verifySigV4>;
  try {
    verified = verifySigV4(
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
      { secrets: options.secrets, region: options.region, service: 's3' },
    );
  } catch (error) {
    if (error instanceof SigV4Error)
      throw new S3Refusal(error.status, error.code, error.message, { cause: error });
    throw error;
  }
  const hash = verified.payloadHash;
  if (/^[0-9a-f]{64}$/.test(hash) && createHash('sha256').update(body).digest('hex') !== hash) {
    throw new S3Refusal(
      400,
      'XAmzContentSHA256Mismatch',
      "The provided 'x-amz-content-sha256' header does not match what was computed.",
    );
  }
  if (req.method === 'PUT') {
    const headers = new Map<string, string>();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined)
        headers.set(name.toLowerCase(), Array.isArray(value) ? value.join(',') : value);
    }
    for (const [name, value] of verified.signedValues)
      if (name.startsWith('x-amz-')) headers.set(name, value);
    const chunked =
      /aws-chunked/.test(headers.get('content-encoding') ?? '') || hash.startsWith('STREAMING-');
    checkChecksums(headers, body, chunked);
  }
}

/** The part size of the multipart relay: under fauxqs's 11 MiB, over S3's 5 MiB minimum. */
const RELAY_PART_BYTES = 8 * 1024 * 1024;

/** A plain (not aws-chunked) PutObject whose body is more than one relay part. */
function isLargeObjectPut(req: http.IncomingMessage, body: Buffer): boolean {
  if (req.method !== 'PUT' || body.length <= RELAY_PART_BYTES) return false;
  const url = new URL(req.url ?? '/', 'http://local');
  const [, bucket, ...key] = url.pathname.split('/');
  if (
    !bucket ||
    key.length === 0 ||
    [...url.searchParams.keys()].some((k) => !k.startsWith('X-Amz-') && k !== 'x-id')
  ) {
    return false;
  }
  const encoding = String(req.headers['content-encoding'] ?? '');
  return !/aws-chunked/.test(encoding) && !req.headers['x-amz-copy-source'];
}

/** Stores `body` at the request's key through CreateMultipartUpload, UploadPart and Complete; the ETag. */
async function putInParts(
  upstream: URL,
  agent: http.Agent,
  req: http.IncomingMessage,
  body: Buffer,
): Promise<string> {
  const path = new URL(req.url ?? '/', 'http://local').pathname;
  const send = (method: string, target: string, payload: Buffer, headers: http.OutgoingHttpHeaders = {}) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const request = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          method,
          path: target,
          headers: { ...headers, host: upstream.host, 'content-length': String(payload.length) },
          agent,
        },
        (answer) => {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((answer.statusCode ?? 500) >= 300)
              reject(new Error(`${method} ${target}: ${answer.statusCode} ${text}`));
            else resolve({ status: answer.statusCode ?? 200, headers: answer.headers, text });
          });
          answer.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(payload);
    });
  const contentType = req.headers['content-type'];
  const created = await send(
    'POST',
    `${path}?uploads`,
    Buffer.alloc(0),
    contentType ? { 'content-type': contentType } : {},
  );
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created.text)?.[1];
  if (!uploadId) throw new Error(`no UploadId in ${created.text}`);
  const parts: string[] = [];
  for (let offset = 0, n = 1; offset < body.length; offset += RELAY_PART_BYTES, n++) {
    const part = body.subarray(offset, offset + RELAY_PART_BYTES);
    const uploaded = await send(
      'PUT',
      `${path}?partNumber=${n}&uploadId=${encodeURIComponent(uploadId)}`,
      part,
    );
    parts.push(
      `<Part><PartNumber>${n}</PartNumber><ETag>${String(uploaded.headers.etag ?? '')}</ETag></Part>`,
    );
  }
  const completion = Buffer.from(`<CompleteMultipartUpload>${parts.join('')}</CompleteMultipartUpload>`);
  const completed = await send('POST', `${path}?uploadId=${encodeURIComponent(uploadId)}`, completion, {
    'content-type': 'application/xml',
  });
  return /<ETag>([^<]+)<\/ETag>/.exec(completed.text)?.[1]?.replaceAll('&quot;', '"') ?? '""';
}

/** Starts the strict S3 front on a free port of 127.0.0.1. */
export async function startStrictS3(options: StrictS3Options): Promise<StrictS3> {
  const front = new StrictS3Front(options);
  const server = http.createServer((req, res) => front.handle(req, res));
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    refused: front.refused,
    stop: () =>
      new Promise<void>((resolve) => {
        front.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** What the strict S3 front does with each request: answer a preflight, refuse, or relay to fauxqs. */
class StrictS3Front {
  /** Requests refused so far, by S3 error code. */
  readonly refused = new Map<string, number>();
  readonly #options: StrictS3Options;
  readonly #upstream: URL;
  readonly #agent = new http.Agent({ keepAlive: true });

  constructor(options: StrictS3Options) {
    this.#options = options;
    this.#upstream = new URL(options.upstream);
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const cors = corsHeaders(req, this.#options.cors);
    if (req.method === 'OPTIONS') {
      req.resume();
      if (cors) res.writeHead(200, cors).end();
      else {
        res.writeHead(403, { 'content-type': 'application/xml' });
        res.end(errorXml('AccessForbidden', 'CORSResponse: This CORS request is not allowed.'));
      }
      return;
    }
    for (const [name, value] of Object.entries(cors ?? {})) res.setHeader(name, value);
    void this.#admitAndRelay(req, res);
  }

  /** Closes the kept-alive connections to fauxqs. */
  close(): void {
    this.#agent.destroy();
  }

  async #admitAndRelay(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let body: Buffer;
    try {
      body = await readBody(req, this.#options.maxBodyBytes ?? MAX_BODY_BYTES);
      admit(req, body, this.#options);
    } catch (error) {
      this.#refuse(res, error);
      return;
    }
    if (isLargeObjectPut(req, body)) await this.#putInParts(req, res, body);
    else this.#forward(req, res, body);
  }

  #refuse(res: http.ServerResponse, error: unknown): void {
    const refusal =
      error instanceof S3Refusal
        ? error
        : new S3Refusal(500, 'InternalError', (error as Error).message, { cause: error });
    this.refused.set(refusal.code, (this.refused.get(refusal.code) ?? 0) + 1);
    if (!res.headersSent) {
      res.writeHead(refusal.status, { 'content-type': 'application/xml', connection: 'close' });
      res.end(errorXml(refusal.code, refusal.message));
    }
  }

  /**
   * fauxqs takes at most 11 MiB a request where S3 takes 5 GiB in one PUT: the same object,
   * stored through fauxqs's multipart upload.
   */
  async #putInParts(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): Promise<void> {
    try {
      const etag = await putInParts(this.#upstream, this.#agent, req, body);
      res.writeHead(200, { etag });
      res.end();
    } catch (error) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`local S3 upstream failed: ${(error as Error).message}`);
    }
  }

  #forward(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): void {
    const upstream = this.#upstream;
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host, 'content-length': String(body.length) },
        agent: this.#agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`local S3 upstream failed: ${error.message}`);
    });
    forward.end(body);
  }
}
