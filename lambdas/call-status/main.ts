/** Wires the call-status route to the real AWS clients; configuration is read once, at start. */
import { boundedRequests, makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoCallLinks } from '#shared/adapters/dynamo-call-links.ts';
import { DynamoBrokerTaskStore } from '#shared/adapters/dynamo-call-tasks.ts';
import { DynamoCallbackSecretStore } from '#shared/adapters/dynamo-callback-secrets.ts';
import { DynamoLeaseStore } from '#shared/adapters/dynamo-leases.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { callEndedMetrics } from '#shared/broker/broker-metrics.ts';
import { makeHttpBrokerNotifier } from '#shared/broker/notify.ts';
import { makeRecordCallStatus } from '#shared/broker/settle.ts';
import { makeRecordTwilioStatus } from '#shared/broker/twilio-status.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { CachedCallbackSecrets, ClientTelephonySecrets } from '#shared/telephony/callback-secrets.ts';
import { makeCallStatusHandler } from './handler.ts';

const { log, observe } = lambdaObservability('call-status');

const controlTable = getStringFromEnv('CONTROL_TABLE');
const tasksTable = getStringFromEnv('TASKS_TABLE');
const provider = getStringFromEnv('TELEPHONY_PROVIDER');
const channelsTable = getStringFromEnv('CHANNELS_TABLE');

const doc = makeDocumentClient(
  makeDynamoClient({
    requestHandler: boundedRequests({ connectionTimeout: 500, requestTimeout: 2_000 }),
    maxAttempts: 3,
  }),
);
// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();
// Read at run time from the channels table (KMS-encrypted), at most once a minute: a rotated
// secret takes effect without a deploy, and never sits in the function's configuration.
const callbackSecrets = new CachedCallbackSecrets({
  store: new DynamoCallbackSecretStore(doc, channelsTable),
  provider,
  clock,
});

// Each Twilio client's auth token, from the same table under the same prefix and key.
const clientSecrets = new ClientTelephonySecrets({
  store: new DynamoCallbackSecretStore(doc, channelsTable),
  clock,
});
const settle = {
  tasks: new DynamoBrokerTaskStore(doc, { controlTable, tasksTable }),
  leases: new DynamoLeaseStore(doc, controlTable),
  notifier: makeHttpBrokerNotifier(),
  clock,
  onCallEnded: callEndedMetrics(log),
  suppressions: new DynamoSuppressionStore(doc, controlTable),
};

export const handler = observe(
  makeCallStatusHandler({
    provider,
    record: makeRecordCallStatus({ ...settle, secrets: () => callbackSecrets.secrets() }),
    twilio: {
      record: makeRecordTwilioStatus({
        ...settle,
        authTokens: (clientId) => clientSecrets.verifying(clientId),
        links: new DynamoCallLinks(doc, tasksTable),
      }),
      // Set by the stack (the URL the brokers give Twilio); unset locally, where the request's own URL is it.
      ...(process.env.TWILIO_CALLBACK_URL ? { publicUrl: process.env.TWILIO_CALLBACK_URL } : {}),
    },
    log,
  }),
);
