/** Wires the job manager to DynamoDB and the broker service on ECS; configuration is read once. */
import { ECSClient } from '@aws-sdk/client-ecs';
import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { makeDynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { makeEcsServiceScaler } from '#shared/adapters/ecs-service.ts';
import { getNumberFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { makeLogger } from '#shared/log.ts';
import { makeJobManagerHandler } from './handler.ts';

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const cluster = getStringFromEnv('BROKER_CLUSTER');
const service = getStringFromEnv('BROKER_SERVICE');
const brokerVersion = getStringFromEnv('BROKER_VERSION');
const maxBrokers = getNumberFromEnv('MAX_BROKERS', 10);

const doc = makeDocumentClient();
const ecs = new ECSClient({});

export const handler = makeJobManagerHandler({
  run: makeRunJobManager({
    store: makeDynamoFleetStore(doc, { controlTable, tasksTable }),
    scaler: makeEcsServiceScaler({ cluster, service }, ecs),
    clock: { now: () => Date.now() },
    maxBrokers,
    desiredVersion: () => brokerVersion,
  }),
  log: makeLogger('job-manager'),
});
