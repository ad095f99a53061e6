/** Wires the inbound (two-way) SMS queue consumer to the real AWS clients; configuration is read once. */
import { makeDocumentClient, makeDynamoClient } from '#shared/adapters/aws-clients.ts';
import { DynamoSmsNumberDirectory } from '#shared/adapters/dynamo-sms-numbers.ts';
import { DynamoSuppressionStore } from '#shared/adapters/dynamo-suppressions.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { getStringFromEnv } from '#shared/config.ts';
import { systemClock } from '#shared/pacing/clock.ts';
import { makeRecordInboundSms } from '#shared/sms/inbound-opt-outs.ts';
import { makeSmsInboundHandler } from './handler.ts';

const { log, observe } = lambdaObservability('sms-inbound');

const controlTable = getStringFromEnv('CONTROL_TABLE');

const doc = makeDocumentClient(makeDynamoClient({ maxAttempts: 3 }));

export const handler = observe(
  makeSmsInboundHandler({
    record: makeRecordInboundSms({
      numbers: new DynamoSmsNumberDirectory(doc, controlTable, { clock: systemClock }),
      suppressions: new DynamoSuppressionStore(doc, controlTable),
      clock: systemClock,
    }),
    log,
  }),
);
