/** Wires the outcome webhook worker to the real AWS clients; configuration is read once, at start. */
import { makeDocumentClient, makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { DynamoOutcomeTargets } from '#shared/adapters/dynamo-outcome-webhooks.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { SqsOutcomeDeliveryQueue } from '#shared/adapters/sqs-outcome-deliveries.ts';
import { clockFromEnv, getNumberFromEnv, getStringFromEnv } from '#shared/config.ts';
import { OutcomeDeliverer } from '#shared/outcomes/deliver.ts';
import { makeOutcomeHttp } from '#shared/outcomes/http.ts';
import { makeOutcomeWebhooksHandler } from './handler.ts';

const { log, observe } = lambdaObservability('outcome-webhooks');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const channelsTable = getStringFromEnv('CHANNELS_TABLE');
const queueUrl = getStringFromEnv('OUTCOME_WEBHOOKS_QUEUE_URL');

const doc = makeDocumentClient();
const queue = new SqsOutcomeDeliveryQueue(makeSqsClient(), queueUrl);
// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();
/** A receiver that has not answered in this long counts as failed (the delivery is retried). */
const POST_TIMEOUT_MS = 8_000;

export const handler = observe(
  makeOutcomeWebhooksHandler({
    deliverer: new OutcomeDeliverer({
      targets: new DynamoOutcomeTargets({ doc, controlTable, channelsTable, clock }),
      http: makeOutcomeHttp({
        timeoutMs: POST_TIMEOUT_MS,
        // Never set in AWS: the local cloud's receivers listen on 127.0.0.1.
        allowLoopback: process.env.OUTCOME_WEBHOOK_ALLOW_LOOPBACK_HTTP === 'true',
      }),
      clock,
      // Never set in AWS: the local cloud's fault tests shorten the 24 h schedule with it.
      delayScale: getNumberFromEnv('OUTCOME_RETRY_DELAY_SCALE', 1),
    }),
    retryLater: (receiptHandle, seconds) => queue.retryLater(receiptHandle, seconds),
    log,
  }),
);
