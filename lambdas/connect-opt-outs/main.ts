/**
 * Wires the Connect opt-out target to the real AWS clients; configuration is read once. Not in the
 * brokers' VPC (it nudges nobody): it reaches Amazon Connect's API, which the VPC's endpoints do not
 * offer, and DynamoDB over the internet.
 */
import { makeConnectClient, makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { ConnectContactAttributes } from '#shared/adapters/connect-contact-attributes.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { makeRecordContactOptOut } from '#shared/broker/contact-opt-outs.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeConnectOptOutsHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaObservability('connect-opt-outs');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');

const doc = makeDocumentClient(makeDynamoClient({ maxAttempts: 3 }));

export const handler = observe(
  makeConnectOptOutsHandler({
    record: makeRecordContactOptOut({
      // The SDK's own retries: a read has no line rate to keep (unlike the broker's starts).
      attributes: new ConnectContactAttributes((region) => makeConnectClient({ region, maxAttempts: 3 })),
      tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
      suppressions: new DynamoSuppressionStore(doc, controlTable),
      clock,
    }),
    log,
  }),
);
