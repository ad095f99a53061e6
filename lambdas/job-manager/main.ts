/**
 * Wires the job manager to DynamoDB, the broker service on ECS and the ingest queue (where it
 * queues the expire sweep of a job past its end); configuration is read once.
 */
import { makeDocumentClient, makeEcsClient, makeSqsClient } from '#shared/adapters/aws-clients.ts';
import { DynamoFleetStore } from '#shared/adapters/dynamo-fleet.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { EcsBrokerService } from '#shared/adapters/ecs-service.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { SqsIngestQueue } from '#shared/adapters/sqs-ingest-queue.ts';
import { clockFromEnv, getNumberFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeRunJobManager } from '#shared/fleet/job-manager.ts';
import { RunLease, runLeaseMs } from '#shared/fleet/run-lease.ts';
import { functions } from '#shared/functions.ts';
import { keys } from '#shared/jobs/model.ts';
import { makeJobManagerHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaObservability('job-manager');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const cluster = getStringFromEnv('BROKER_CLUSTER');
const serviceName = getStringFromEnv('BROKER_SERVICE');
const brokerVersion = getStringFromEnv('BROKER_VERSION');
const maxBrokers = getNumberFromEnv('MAX_BROKERS', 10);
const ingestQueueUrl = getStringFromEnv('INGEST_QUEUE_URL');

const doc = makeDocumentClient();
const ecs = makeEcsClient();
const service = new EcsBrokerService({ cluster, service: serviceName }, ecs);
const sweeps = new SqsIngestQueue(makeSqsClient(), ingestQueueUrl);

/** The primary deployment's version; this function's own while ECS cannot say (logged). */
async function desiredVersion(): Promise<string> {
  try {
    return (await service.primaryVersion()) ?? brokerVersion;
  } catch (error) {
    log.warn('primary deployment version unknown; using the configured one', { error });
    return brokerVersion;
  }
}

export const handler = observe(
  makeJobManagerHandler({
    run: makeRunJobManager({
      store: new DynamoFleetStore(doc, { controlTable, tasksTable }),
      scaler: service,
      sweeps,
      clock,
      maxBrokers,
      desiredVersion,
    }),
    runLease: new RunLease({
      store: new DynamoLeaseStore(doc, controlTable, { key: keys.runLease }),
      clock,
      leaseMs: runLeaseMs(functions['job-manager'].timeoutSeconds),
      log,
    }),
    log,
  }),
);
