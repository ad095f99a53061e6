/** Wires the channels API to the channels table; configuration is read once, at start. */

import { makeDocumentClient } from '#shared/adapters/aws-clients.ts';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { lambdaObservability } from '#shared/adapters/lambda-observability.ts';
import { ChannelsApi } from '#shared/channels/api.ts';
import { clockFromEnv, getStringFromEnv } from '#shared/config.ts';
import { makeChannelsApiHandler } from './handler.ts';

// The system's time (the local cloud may shift it: `npm start -- --at`).
const clock = clockFromEnv();

const { log, observe } = lambdaObservability('channels-api');

const channels = new DynamoChannelStore(makeDocumentClient(), getStringFromEnv('CHANNELS_TABLE'));

export const handler = observe(
  makeChannelsApiHandler({ api: new ChannelsApi(channels, () => clock.now()), log }),
);
