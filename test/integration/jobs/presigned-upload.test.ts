/**
 * The local S3 path is as strict as S3 (`local/strict-s3.ts`): a list uploaded by a browser's plain
 * `fetch` to the presigned URL the jobs API hands out lands byte for byte, and what S3 refuses —
 * a presigned URL carrying an empty body's checksum, another method or key, an expired URL, an
 * unsigned request, a wrong Content-MD5 — is refused here too.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS } from '#local/cloud.ts';
import { makeS3Client, makeS3PresignClient } from '#shared/adapters/aws-clients.ts';
import { S3UploadFiles } from '#shared/adapters/s3-uploads.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
const bucket = cloud.info.bucketNames.uploads!;
const config = { region: cloud.info.region, credentials: LOCAL_CREDENTIALS, endpoint: cloud.info.s3Endpoint };
const pathStyle = { AWS_S3_FORCE_PATH_STYLE: 'true' };
let presigner: S3Client;
let sdkDefault: S3Client;

beforeAll(() => {
  presigner = makeS3PresignClient(pathStyle, config);
  sdkDefault = makeS3Client(pathStyle, config);
});
afterAll(() => {
  presigner.destroy();
  sdkDefault.destroy();
});

const csv = Buffer.from('電話番号,名前\n090-1234-5678,山田 太郎\n080-2345-6789,佐藤 花子\n', 'utf8');
const key = () => `uploads/${uniqueName('client')}/${uniqueName('job')}.csv`;

async function read(k: string): Promise<Buffer> {
  const out = await cloud.s3.send(new GetObjectCommand({ Bucket: bucket, Key: k }));
  return Buffer.from(await out.Body!.transformToByteArray());
}

describe('a presigned upload, as a browser makes it', () => {
  it('lands byte for byte when the URL comes from the presigning client the jobs API uses', async () => {
    const k = key();
    const url = await new S3UploadFiles(presigner, bucket).presignPut(k, 900);
    expect(url).not.toMatch(/x-amz-checksum|x-amz-sdk-checksum-algorithm/i);
    const response = await fetch(url, { method: 'PUT', body: csv, headers: { 'content-type': 'text/csv' } });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(await read(k)).toEqual(csv);
  });

  it('takes a list larger than fauxqs takes in one request (S3 takes 5 GiB in one PUT), byte for byte (issue 13 #9)', async () => {
    const k = key();
    const url = await new S3UploadFiles(presigner, bucket).presignPut(k, 900);
    const line = Buffer.from('090-1234-5678,山田 太郎,東京都千代田区丸の内一丁目\n', 'utf8');
    const big = Buffer.concat(
      Array.from({ length: Math.ceil((20 * 1024 * 1024) / line.length) }, () => line),
    );
    const response = await fetch(url, { method: 'PUT', body: big, headers: { 'content-type': 'text/csv' } });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(response.headers.get('etag')).toBeTruthy();
    const stored = await read(k);
    expect(stored.length).toBe(big.length);
    expect(stored.equals(big)).toBe(true);
  });

  it("is refused like S3 refuses it when the URL carries the SDK default's checksum of an empty body", async () => {
    const url = await getSignedUrl(sdkDefault, new PutObjectCommand({ Bucket: bucket, Key: key() }), {
      expiresIn: 900,
    });
    expect(url).toMatch(/x-amz-checksum-crc32=AAAAAA/);
    const response = await fetch(url, { method: 'PUT', body: csv });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('<Code>BadDigest</Code>');
  });

  it('refuses another method, another key, an expired URL and a forged signature', async () => {
    const k = key();
    const url = await new S3UploadFiles(presigner, bucket).presignPut(k, 900);
    const asGet = await fetch(url);
    expect(asGet.status).toBe(403);
    expect(await asGet.text()).toContain('SignatureDoesNotMatch');
    const other = url.replace(/\/uploads\/[^?]+/, `/${key()}`);
    expect((await fetch(other, { method: 'PUT', body: csv })).status).toBe(403);
    const forged = url.replace(/X-Amz-Signature=[0-9a-f]+/, `X-Amz-Signature=${'0'.repeat(64)}`);
    expect((await fetch(forged, { method: 'PUT', body: csv })).status).toBe(403);
    const expired = await getSignedUrl(presigner, new PutObjectCommand({ Bucket: bucket, Key: k }), {
      expiresIn: 60,
      signingDate: new Date(Date.now() - 120_000),
    });
    const late = await fetch(expired, { method: 'PUT', body: csv });
    expect(late.status).toBe(403);
    expect(await late.text()).toContain('Request has expired');
    const unsigned = await fetch(`${cloud.info.s3Endpoint}/${bucket}/${k}`, { method: 'PUT', body: csv });
    expect(unsigned.status).toBe(403);
    await expect(read(k)).rejects.toThrow();
  });
});

describe('signed SDK requests', () => {
  it('pass with the checksum the SDK computes, and fail with a Content-MD5 of other bytes', async () => {
    const k = key();
    await sdkDefault.send(new PutObjectCommand({ Bucket: bucket, Key: k, Body: csv }));
    expect(await read(k)).toEqual(csv);
    await expect(
      sdkDefault.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key(),
          Body: csv,
          ContentMD5: 'AAAAAAAAAAAAAAAAAAAAAA==',
        }),
      ),
    ).rejects.toMatchObject({ name: 'BadDigest' });
  });
});
