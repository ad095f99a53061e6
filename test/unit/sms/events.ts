/**
 * Factories beside the fixtures (`./fixtures/`, see its README): an SQS event as the event source
 * mapping hands a batch to a function, its bodies the fixtures as SNS delivered them.
 */
import { readFileSync } from 'node:fs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';

export type SmsFixture = 'text-successful' | 'two-way-stop' | 'sns-notification';

/** A fixture's JSON, parsed. */
export function fixture(name: SmsFixture): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), 'utf8')) as Record<
    string,
    unknown
  >;
}

/** A delivery event record: the guide's example with `changes` applied (its context, type …). */
export function textEvent(changes: Record<string, unknown> = {}): Record<string, unknown> {
  const record = fixture('text-successful');
  const eventType = (changes.eventType as string | undefined) ?? (record.eventType as string);
  return { ...record, messageStatus: eventType.slice('TEXT_'.length), ...changes };
}

/** One SQS record per body (an object is sent as its JSON), message ids `m0`, `m1` … */
export function sqsEvent(bodies: readonly unknown[]): SQSEvent {
  return {
    Records: bodies.map(
      (body, i): SQSRecord => ({
        messageId: `m${i}`,
        receiptHandle: `r${i}`,
        body: typeof body === 'string' ? body : JSON.stringify(body),
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: '1686975104000',
          SenderId: 'AIDAIENQZJOLO23YVJ4VO',
          ApproximateFirstReceiveTimestamp: '1686975104001',
        },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:us-east-1:111122223333:switchboard-dev-sms-events',
        awsRegion: 'us-east-1',
      }),
    ),
  };
}
