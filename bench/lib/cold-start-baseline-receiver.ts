/**
 * The webhook receiver's baseline for bench/cold-start (bundled by the bench as CDK bundles the
 * real one): the least a LINE webhook receiver does — verify `x-line-signature` (HMAC-SHA256 of the
 * raw body under the channel secret, from the environment) and put the body on the queue with one
 * SQS `SendMessage` — with one SQS client built at import. No middleware, logger, tracer, channel
 * table or validation: what the real receiver carries beyond this is what the ratio shows.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

const secret = process.env.BASELINE_CHANNEL_SECRET ?? '';
const queueUrl = process.env.WEBHOOK_EVENTS_QUEUE_URL ?? '';
const sqs = new SQSClient({});

export async function handler(event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> {
  const body = Buffer.from(event.body ?? '', event.isBase64Encoded ? 'base64' : 'utf8');
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(event.headers['x-line-signature'] ?? '', 'base64');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { statusCode: 401 };
  const { events = [] } = JSON.parse(body.toString('utf8')) as { events?: { webhookEventId: string }[] };
  if (events.length > 0) {
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: body.toString('utf8'),
        MessageGroupId: event.pathParameters?.channelId ?? 'channel',
        MessageDeduplicationId: events[0]!.webhookEventId,
      }),
    );
  }
  return { statusCode: 200, body: JSON.stringify({ accepted: events.length }) };
}
