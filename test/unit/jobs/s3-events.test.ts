import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isUlid, newUlid } from '#shared/ids.ts';
import {
  decodeS3Key,
  dropJobId,
  MalformedS3EventError,
  parseS3Event,
  uploadTarget,
} from '#shared/jobs/s3-events.ts';

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`../../fixtures/jobs/${name}`, import.meta.url), 'utf8'));

describe('S3 event notifications', () => {
  it('reads the object of a real event, decoding a key with + for spaces and %-escapes', () => {
    expect(parseS3Event(fixture('s3-event-put.json'))).toEqual([
      {
        bucket: 'switchboard-prod-uploads',
        key: 'incoming/acme/March list 電話(2).csv',
        eTag: 'd41d8cd98f00b204e9800998ecf8427e',
        size: 1024,
        sequencer: '0055AED6DCD90281E5',
        eventTime: Date.parse('2026-11-20T01:02:03.456Z'),
      },
    ]);
  });

  it('keeps a literal plus, which S3 sends as %2B', () => {
    expect(decodeS3Key('incoming/acme/a%2Bb+c.csv')).toBe('incoming/acme/a+b c.csv');
  });

  it('has no objects in the test event S3 sends when a notification is configured', () => {
    expect(parseS3Event(fixture('s3-test-event.json'))).toEqual([]);
  });

  it('refuses a body that is not an S3 event', () => {
    expect(() => parseS3Event({ hello: 'world' })).toThrow(MalformedS3EventError);
    expect(() => parseS3Event({ Records: [{ eventName: 'ObjectCreated:Put', s3: {} }] })).toThrow(
      MalformedS3EventError,
    );
  });

  it('tells an API upload from a drop, and ignores other keys', () => {
    expect(uploadTarget('uploads/acme/01JD0000000000000000000000.csv')).toEqual({
      kind: 'upload',
      clientId: 'acme',
      jobId: '01JD0000000000000000000000',
    });
    expect(uploadTarget('incoming/acme/march/list.CSV')).toEqual({
      kind: 'drop',
      clientId: 'acme',
      fileName: 'march/list',
      sidecarKey: 'incoming/acme/march/list.json',
    });
    expect(uploadTarget('uploads/acme/not-a-ulid.csv')).toBeUndefined();
    expect(uploadTarget('state/acme/x/filter.bin')).toBeUndefined();
    expect(uploadTarget('incoming/acme/list.json')).toBeUndefined();
  });
});

describe('job ids of dropped files', () => {
  const object = {
    bucket: 'b',
    key: 'incoming/acme/list.csv',
    eTag: 'abc',
    eventTime: Date.parse('2026-11-20T01:02:03Z'),
  };

  it('are ULIDs of the event time, the same for every delivery of one event', () => {
    const id = dropJobId(object);
    expect(isUlid(id)).toBe(true);
    expect(id.slice(0, 10)).toBe(newUlid(object.eventTime).slice(0, 10)); // the time part
    expect(dropJobId({ ...object })).toBe(id);
  });

  it('differ for another version, key or bucket', () => {
    const id = dropJobId(object);
    expect(dropJobId({ ...object, eTag: 'abd' })).not.toBe(id);
    expect(dropJobId({ ...object, key: 'incoming/acme/list2.csv' })).not.toBe(id);
    expect(dropJobId({ ...object, bucket: 'c' })).not.toBe(id);
  });
});

describe('the local notifier', () => {
  it('sends what S3 sends: the parsed event gives back the object, key and all', async () => {
    const { s3EventNotification } = await import('#local/s3-notifier.ts');
    const key = 'incoming/acme/März list+1 (final)&more.csv';
    const body = s3EventNotification({
      bucket: 'b',
      key,
      eTag: '"abc-2"',
      size: 10,
      lastModified: new Date('2026-11-20T01:02:03.000Z'),
      region: 'us-east-1',
      sequencer: '01',
    }) as { Records: { eventName: string; s3: { object: { key: string } } }[] };
    expect(body.Records[0]!.eventName).toBe('ObjectCreated:CompleteMultipartUpload');
    expect(body.Records[0]!.s3.object.key).not.toContain(' ');
    expect(parseS3Event(JSON.parse(JSON.stringify(body)))).toEqual([
      {
        bucket: 'b',
        key,
        eTag: 'abc-2',
        size: 10,
        sequencer: '01',
        eventTime: Date.parse('2026-11-20T01:02:03Z'),
      },
    ]);
  });
});
