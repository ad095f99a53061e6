/**
 * The local S3 event notifications against fauxqs: only the objects the deployed notification
 * filters match (UPLOAD_NOTIFICATIONS: prefix and case-sensitive suffix, as S3 matches them) reach
 * the queue, each once, as S3's event JSON.
 */
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { createQueueWithDlq } from '#local/cloud.ts';
import { type S3Notifier, startS3Notifier } from '#local/s3-notifier.ts';
import { queueSpec } from '#shared/resources.ts';
import { testCloud, uniqueName } from '../../support/cloud.ts';

const cloud = testCloud();
let notifier: S3Notifier | undefined;
afterAll(async () => {
  await notifier?.stop();
});

describe('the local S3 notifier', () => {
  it('notifies created objects under uploads/ and incoming/ ending in .csv or .CSV, and nothing else', async () => {
    const bucket = uniqueName('notify').toLowerCase().slice(0, 60);
    await cloud.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const queue = await createQueueWithDlq(cloud.sqs, 'test', queueSpec('ingest'), {
      name: uniqueName('notify'),
    });
    notifier = await startS3Notifier({
      s3: cloud.s3,
      sqs: cloud.sqs,
      bucket,
      queueUrl: queue.url,
      region: cloud.info.region,
      intervalMs: 50,
    });
    const keys = [
      'incoming/acme/list.csv',
      'incoming/acme/EXPORT.CSV',
      'uploads/acme/01JOB.csv',
      'incoming/acme/list.Csv',
      'incoming/acme/list.txt',
      'incoming/acme/list.csv.json',
      'elsewhere/list.csv',
    ];
    for (const key of keys) {
      await cloud.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'phone\n09012345678\n' }));
    }
    await notifier.settled();
    await notifier.settled();

    const notified: string[] = [];
    for (;;) {
      const out = await cloud.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: queue.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      if (!out.Messages?.length) break;
      for (const m of out.Messages) {
        const event = JSON.parse(m.Body!) as { Records: { s3: { object: { key: string } } }[] };
        notified.push(decodeURIComponent(event.Records[0]!.s3.object.key));
      }
    }
    expect(notified.sort()).toEqual([
      'incoming/acme/EXPORT.CSV',
      'incoming/acme/list.csv',
      'uploads/acme/01JOB.csv',
    ]);
    expect(notifier.sent()).toBe(3);
  });
});
