/** Wires the webhook processor to the real AWS clients; configuration is read once, at start. */
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { makeDocumentClient, makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { DynamoProcessedEventStore } from '#shared/adapters/dynamo-webhook-events.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { cachedChannels } from '#shared/channels/cache.ts';
import { ChannelClients } from '#shared/channels/clients.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import {
  DEFAULT_LINE_API_URL,
  MessagingApiClient,
  type MessagingClient,
} from '#shared/line/messaging-client.ts';
import { makeProcessWebhookEvent } from '#shared/webhooks/process.ts';
import { makeProcessorHandler } from './handler.ts';

const { log, observe } = lambdaObservability('webhook-processor');

const channelsTable = getStringFromEnv('CHANNELS_TABLE');
const eventsTable = getStringFromEnv('EVENTS_TABLE');
const controlTable = getStringFromEnv('CONTROL_TABLE');
const queueUrl = getStringFromEnv('WEBHOOK_EVENTS_QUEUE_URL');
const lineApiUrl = process.env.LINE_API_URL || DEFAULT_LINE_API_URL;

const doc = makeDocumentClient();
const sqs = makeSqsClient();
// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();
/** A Messaging API request gives up after this long (then it is retried with the same key). */
const MESSAGING_TIMEOUT_MS = 5_000;

// One client per channel (and access token), kept while the container lives: keep-alive pays off.
const clients = new ChannelClients<MessagingClient>({
  create: (channel) =>
    new MessagingApiClient({
      channelAccessToken: channel.accessToken,
      baseUrl: lineApiUrl,
      timeoutMs: MESSAGING_TIMEOUT_MS,
    }),
});

export const handler = observe(
  makeProcessorHandler({
    process: makeProcessWebhookEvent({
      channels: cachedChannels(new DynamoChannelStore(doc, channelsTable)),
      events: new DynamoProcessedEventStore(doc, eventsTable),
      optOuts: new DynamoOptOutStore(doc, controlTable),
      suppressions: new DynamoSuppressionStore(doc, controlTable),
      messagingFor: (channel) => clients.for(channel),
      clock,
      log,
    }),
    retryLater: async (receiptHandle, seconds) => {
      await sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: receiptHandle,
          VisibilityTimeout: seconds,
        }),
      );
    },
    log,
    // One request, and the idempotency and opt-out writes around it.
    recordBudgetMs: MESSAGING_TIMEOUT_MS + 2_000,
  }),
);
