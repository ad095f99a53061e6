/** Wires the Connect contact-event target to the real AWS clients; configuration is read once. */
import { boundedRequests, makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { callEndedMetrics } from '#shared/broker/broker-metrics.ts';
import { makeRecordContactEvent } from '#shared/broker/contact-events.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeConnectEventsHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaObservability('connect-events');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');

const doc = makeDocumentClient(
  makeDynamoClient({
    requestHandler: boundedRequests({ connectionTimeout: 500, requestTimeout: 2_000 }),
    maxAttempts: 3,
  }),
);

export const handler = observe(
  makeConnectEventsHandler({
    record: makeRecordContactEvent({
      tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
      leases: new DynamoLeaseStore(doc, controlTable),
      notifier: makeHttpBrokerNotifier(),
      links: new DynamoCallLinks(doc, tasksTable),
      clock,
      onCallEnded: callEndedMetrics(log),
    }),
    log,
  }),
);
