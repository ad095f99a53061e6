/**
 * Wires the unsubscribe link's route to the real AWS clients. Configuration is read once, at start,
 * the signing keys included (from Secrets Manager; on the local cloud from `UNSUBSCRIBE_KEYS`): a
 * missing or malformed key fails the function's start, not a reader's click. Not in the brokers' VPC
 * (it nudges nobody): it reaches DynamoDB and Secrets Manager over the internet.
 */
import {
  makeDocumentClient,
  makeDynamoClient,
  makeSecretsManagerClient,
} from '#shared/adapters/aws-clients.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { UnsubscribeKeyring } from '#shared/adapters/unsubscribe-secret.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { OneClickUnsubscribe } from '#shared/email/one-click-unsubscribe.ts';
import { makeUnsubscribeHandler } from './handler.ts';

const { log, observe } = lambdaObservability('unsubscribe');

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();
const controlTable = getStringFromEnv('CONTROL_TABLE');

const doc = makeDocumentClient(makeDynamoClient({ maxAttempts: 3 }));
const keyring = UnsubscribeKeyring.fromEnvironment(
  process.env,
  () => makeSecretsManagerClient({ maxAttempts: 3 }),
  {
    clock,
  },
);
await keyring.tokens();

export const handler = observe(
  makeUnsubscribeHandler({
    unsubscribe: new OneClickUnsubscribe({
      verifier: keyring,
      suppressions: new DynamoSuppressionStore(doc, controlTable),
      clock,
    }),
    log,
  }),
);
