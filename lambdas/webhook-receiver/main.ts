/** Wires the webhook receiver to the real AWS clients; configuration is read once, at start. */
import {
  boundedRequests,
  makeDocumentClient,
  makeDynamoClient,
  makeSqsClient,
} from '#shared/adapters/aws-clients.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { lambdaLogging } from '#shared/adapters/lambda-logging.ts';
import { SqsEventQueue } from '#shared/adapters/sqs-event-queue.ts';
import { cachedChannels } from '#shared/channels/cache.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeReceiveWebhook } from '#shared/webhooks/receive.ts';
import { makeReceiverHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaLogging('webhook-receiver');

const channelsTable = getStringFromEnv('CHANNELS_TABLE');
const queueUrl = getStringFromEnv('WEBHOOK_EVENTS_QUEUE_URL');

// LINE waits 2 seconds: every call on the way gets a short timeout and few retries.
const fast = () => boundedRequests({ connectionTimeout: 300, requestTimeout: 800 });
const doc = makeDocumentClient(makeDynamoClient({ requestHandler: fast(), maxAttempts: 2 }));
const sqs = makeSqsClient({ requestHandler: fast(), maxAttempts: 2 });

export const handler = observe(
  makeReceiverHandler({
    receive: makeReceiveWebhook({
      channels: cachedChannels(new DynamoChannelStore(doc, channelsTable)),
      queue: new SqsEventQueue(sqs, queueUrl),
      clock,
    }),
    log,
  }),
);
