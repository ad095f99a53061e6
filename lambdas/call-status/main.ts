/** Wires the call-status route to the real AWS clients; configuration is read once, at start. */
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { makeDynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { makeDynamoBrokerTaskStore } from '#shared/adapters/dynamo-tasks.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { getStringFromEnv } from '#shared/config.ts';
import { makeLogger } from '#shared/log.ts';
import { makeCallStatusHandler } from './handler.ts';

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const provider = getStringFromEnv('TELEPHONY_PROVIDER');
// Several secrets, comma-separated, during a rotation.
const secrets = getStringFromEnv('TELEPHONY_CALLBACK_SECRET')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');

const doc = makeDocumentClient(
  makeDynamoClient({
    requestHandler: new NodeHttpHandler({ connectionTimeout: 500, requestTimeout: 2_000 }),
    maxAttempts: 3,
  }),
);
const clock = { now: () => Date.now() };

export const handler = makeCallStatusHandler({
  provider,
  record: makeRecordCallStatus({
    tasks: makeDynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
    leases: makeDynamoLeaseStore(doc, controlTable),
    notifier: makeHttpBrokerNotifier(),
    clock,
    secrets,
  }),
  log: makeLogger('call-status'),
});
