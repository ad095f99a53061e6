/**
 * A small client for Switchboard's operator API (IAM-authorised routes): every request is signed
 * with SigV4 for `execute-api`, as API Gateway requires. Works against a deployed stack with real
 * credentials and against `npm start`'s stand-in with the local ones.
 */
import { createHash, createHmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';

/** SHA-256 (and its HMAC) on node:crypto, in the shape the SDK's SigV4 signer asks for. */
export class Sha256 {
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

/** AWS credentials, as the SDK's signer takes them. */
export interface OperatorCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface OperatorClientOptions {
  readonly baseUrl: string;
  readonly region: string;
  /**
   * The credentials, or a provider of them (e.g. the SDK's `fromNodeProviderChain()`), asked before
   * each signature: temporary credentials are refreshed by the provider, not held here.
   */
  readonly credentials: OperatorCredentials | (() => Promise<OperatorCredentials>);
}

export interface OperatorResponse {
  readonly status: number;
  readonly body: string;
  json<T = unknown>(): T;
}

/**
 * `fetch` with every request SigV4-signed for `execute-api` (headers, query and the body's hash),
 * as the IAM authorizer checks it.
 */
export function makeSignedFetch(options: Omit<OperatorClientOptions, 'baseUrl'>) {
  const signer = new SignatureV4({
    service: 'execute-api',
    region: options.region,
    credentials: options.credentials,
    sha256: Sha256 as never,
  });
  return async (
    method: string,
    url: URL,
    init: {
      readonly headers?: Readonly<Record<string, string>>;
      readonly body?: Uint8Array | string;
      /** `manual`: answer a redirect as it is (a report's 303 to S3 must not carry the signature). */
      readonly redirect?: 'follow' | 'manual' | 'error';
      readonly signal?: AbortSignal;
    } = {},
  ): Promise<Response> => {
    const payload = init.body === undefined ? undefined : Buffer.from(init.body);
    const headers: Record<string, string> = { host: url.host };
    for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = value;
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
    return fetch(url, {
      method,
      headers: signed.headers as Record<string, string>,
      ...(payload ? { body: payload } : {}),
      ...(init.redirect ? { redirect: init.redirect } : {}),
      ...(init.signal ? { signal: init.signal } : {}),
    });
  };
}

export function makeOperatorClient(options: OperatorClientOptions) {
  const signedFetch = makeSignedFetch(options);
  const base = new URL(options.baseUrl);

  return async function request(
    method: string,
    path: string,
    body?: { readonly json: unknown } | { readonly bytes: Uint8Array; readonly contentType: string },
  ): Promise<OperatorResponse> {
    const url = new URL(path, base);
    const res = await signedFetch(method, url, {
      ...(body === undefined
        ? {}
        : 'json' in body
          ? { body: JSON.stringify(body.json), headers: { 'content-type': 'application/json' } }
          : { body: body.bytes, headers: { 'content-type': body.contentType } }),
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
