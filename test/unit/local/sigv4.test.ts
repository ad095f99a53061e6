import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { Sha256 } from '#local/operator-client.ts';
import { SigV4Error, verifySigV4 } from '#local/sigv4.ts';

interface HttpRequest {
  method: string;
  protocol: string;
  hostname: string;
  port: number;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

const credentials = { accessKeyId: 'local', secretAccessKey: 'local-secret' };
const secrets = { local: 'local-secret' };
const signer = (service = 's3') =>
  new SignatureV4({
    credentials,
    region: 'us-east-1',
    service,
    sha256: Sha256 as never,
    uriEscapePath: service !== 's3',
  });
const NOW = Date.UTC(2026, 10, 24, 12, 0, 0);

function request(query: Record<string, string> = {}, method = 'PUT', path = '/bucket/uploads/a.csv') {
  return {
    method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    port: 4566,
    path,
    query,
    headers: { host: '127.0.0.1:4566', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  } as HttpRequest;
}
const urlOf = (r: HttpRequest) => {
  const q = Object.entries(r.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return q ? `${r.path}?${q}` : r.path;
};
const verify = (r: HttpRequest, now = NOW, method = r.method) =>
  verifySigV4(
    { method, url: urlOf(r), headers: r.headers },
    { secrets, region: 'us-east-1', service: 's3', now },
  );

describe('SigV4 verification (checked against the SDK signer)', () => {
  it('accepts a presigned URL made by the SDK, until it expires', async () => {
    const signed = (await signer().presign(request(), {
      signingDate: new Date(NOW),
      expiresIn: 900,
    })) as HttpRequest;
    expect(verify(signed).form).toBe('query');
    expect(verify(signed, NOW + 899_000).accessKeyId).toBe('local');
    expect(() => verify(signed, NOW + 901_000)).toThrow(/expired/);
  });

  it('refuses the URL for another method, another key, or with a changed signature', async () => {
    const signed = (await signer().presign(request(), {
      signingDate: new Date(NOW),
      expiresIn: 900,
    })) as HttpRequest;
    expect(() => verify(signed, NOW, 'GET')).toThrow(SigV4Error);
    const other = { ...signed, path: '/bucket/uploads/b.csv' } as HttpRequest;
    expect(() => verify(other)).toThrow(/does not match/);
    const forged = {
      ...signed,
      query: { ...signed.query, 'X-Amz-Signature': '0'.repeat(64) },
    } as HttpRequest;
    expect(() => verify(forged)).toThrow(/does not match/);
  });

  it('accepts a header-signed request, refuses an unknown key, a wrong secret and a skewed clock', async () => {
    const withBody = request({ 'x-id': 'PutObject' });
    withBody.headers['x-amz-content-sha256'] = 'UNSIGNED-PAYLOAD';
    const signed = (await signer().sign(withBody, { signingDate: new Date(NOW) })) as HttpRequest;
    expect(verify(signed).form).toBe('header');
    expect(() => verify(signed, NOW + 16 * 60_000)).toThrow(/too large/);
    const wrong = (await new SignatureV4({
      credentials: { ...credentials, secretAccessKey: 'nope' },
      region: 'us-east-1',
      service: 's3',
      sha256: Sha256 as never,
      uriEscapePath: false,
    }).sign(withBody, { signingDate: new Date(NOW) })) as HttpRequest;
    expect(() => verify(wrong)).toThrow(/does not match/);
    const stranger = (await new SignatureV4({
      credentials: { accessKeyId: 'AKIDSTRANGER', secretAccessKey: 'x' },
      region: 'us-east-1',
      service: 's3',
      sha256: Sha256 as never,
      uriEscapePath: false,
    }).sign(withBody, { signingDate: new Date(NOW) })) as HttpRequest;
    expect(() => verify(stranger)).toThrow(/access key id/);
  });

  it('refuses an unsigned request and a garbage Authorization header', () => {
    expect(() => verify(request())).toThrow(/not signed/);
    const garbage = request();
    garbage.headers.authorization = 'AWS4-HMAC-SHA256 garbage';
    expect(() => verify(garbage)).toThrow(/malformed/);
  });
});
