/** Wires the SES email-event target to the real AWS clients; configuration is read once. */
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { DynamoTaskReopen } from '#shared/adapters/dynamo-task-reopen.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeRecordEmailEvent } from '#shared/email/email-outcomes.ts';
import { EMAIL_DELIVERY_RANK } from '#shared/email/ses-events.ts';
import { makeReopenUnreached } from '#shared/jobs/reopen.ts';
import { makeEmailEventsHandler } from './handler.ts';

const { log, observe } = lambdaObservability('email-events');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');

const doc = makeDocumentClient(makeDynamoClient({ maxAttempts: 3 }));

export const handler = observe(
  makeEmailEventsHandler({
    record: makeRecordEmailEvent({
      outcomes: new DynamoDeliveryOutcomeStore(doc, tasksTable, EMAIL_DELIVERY_RANK, 'email'),
      suppressions: new DynamoSuppressionStore(doc, controlTable),
      reopen: makeReopenUnreached(new DynamoTaskReopen(doc, { controlTable, tasksTable }), clockFromEnv()),
    }),
    log,
  }),
);
