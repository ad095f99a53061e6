/**
 * A small client for Switchboard's operator API (IAM-authorised routes): every request is signed
 * with SigV4 for `execute-api`, as API Gateway requires. Works against a deployed stack with real
 * credentials and against `npm start`'s stand-in with the local ones.
 */
import { createHash, createHmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';

/** SHA-256 (and its HMAC) in the shape the SigV4 signer asks for. */
class Sha256 {
  private readonly hash;
  constructor(secret?: string | Uint8Array) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', secret);
  }
  update(data: string | Uint8Array | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(typeof data === 'string' ? data : Buffer.from(data as ArrayBuffer));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {}
}

export interface OperatorClientOptions {
  readonly baseUrl: string;
  readonly region: string;
  readonly credentials: {
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    readonly sessionToken?: string;
  };
}

export interface OperatorResponse {
  readonly status: number;
  readonly body: string;
  json<T = unknown>(): T;
}

export function makeOperatorClient(options: OperatorClientOptions) {
  const signer = new SignatureV4({
    service: 'execute-api',
    region: options.region,
    credentials: options.credentials,
    sha256: Sha256 as never,
  });
  const base = new URL(options.baseUrl);

  return async function request(
    method: string,
    path: string,
    body?: { readonly json: unknown } | { readonly bytes: Uint8Array; readonly contentType: string },
  ): Promise<OperatorResponse> {
    const url = new URL(path, base);
    const payload =
      body === undefined
        ? undefined
        : 'json' in body
          ? Buffer.from(JSON.stringify(body.json))
          : Buffer.from(body.bytes);
    const headers: Record<string, string> = { host: url.host };
    if (body) headers['content-type'] = 'json' in body ? 'application/json' : body.contentType;
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = v;
    const signed = await signer.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query,
      headers,
      ...(payload ? { body: payload } : {}),
    });
    const res = await fetch(url, {
      method,
      headers: signed.headers as Record<string, string>,
      ...(payload ? { body: payload } : {}),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text,
      json: <T>() => JSON.parse(text) as T,
    };
  };
}

export type OperatorRequest = ReturnType<typeof makeOperatorClient>;
