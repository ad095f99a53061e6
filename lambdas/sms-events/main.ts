/** Wires the SMS delivery events' queue consumer to the real AWS clients; configuration is read once. */
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoDeliveryOutcomeStore } from '#shared/adapters/dynamo-delivery-outcomes.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { getStringFromEnv } from '#shared/config.ts';
import { makeRecordSmsEvent, SMS_DELIVERY_RANK } from '#shared/sms/sms-outcomes.ts';
import { makeSmsEventsHandler } from './handler.ts';

const { log, observe } = lambdaObservability('sms-events');

const tasksTable = getStringFromEnv('TASKS_TABLE');

const doc = makeDocumentClient(makeDynamoClient({ maxAttempts: 3 }));

export const handler = observe(
  makeSmsEventsHandler({
    record: makeRecordSmsEvent({
      outcomes: new DynamoDeliveryOutcomeStore(doc, tasksTable, SMS_DELIVERY_RANK, 'sms'),
    }),
    log,
  }),
);
