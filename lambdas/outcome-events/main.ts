/** Wires the outcome event producer to the real AWS clients; configuration is read once, at start. */
import { makeDocumentClient, makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { clientHasOutcomeWebhook } from '#shared/adapters/dynamo-outcome-webhooks.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { SqsOutcomeDeliveryQueue } from '#shared/adapters/sqs-outcome-deliveries.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { CachedWebhookDirectory, OutcomeRouter } from '#shared/outcomes/route.ts';
import { makeOutcomeEventsHandler } from './handler.ts';

const { log, observe } = lambdaObservability('outcome-events');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const queueUrl = getStringFromEnv('OUTCOME_WEBHOOKS_QUEUE_URL');

const doc = makeDocumentClient();
const sqs = makeSqsClient();
// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

export const handler = observe(
  makeOutcomeEventsHandler({
    router: new OutcomeRouter({
      directory: new CachedWebhookDirectory({
        read: (clientId) => clientHasOutcomeWebhook(doc, controlTable, clientId),
        clock,
      }),
      queue: new SqsOutcomeDeliveryQueue(sqs, queueUrl),
      clock,
    }),
    log,
  }),
);
