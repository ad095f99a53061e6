/**
 * The broker's message side: message tasks (claims fenced by the lease), and the LINE side of
 * message jobs ({@link LineChannelSenders}): a send port per channel over a keep-alive agent sized
 * to the senders, kept for the process's life (the transport `bench/message-throughput.ts` measures; a
 * channel whose access token changed gets a new one), and the channel's monthly quota. Both only
 * through a channel the client owns ({@link OwnChannels}), read again each round.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoChannelStore } from '#shared/adapters/dynamo-channels.ts';
import { DynamoMessageTaskStore } from '#shared/adapters/dynamo-message-tasks.ts';
import { DynamoOptOutStore } from '#shared/adapters/dynamo-opt-outs.ts';
import { claimSuppressions } from '#shared/adapters/dynamo-person-suppressions.ts';
import type { BrokerDeps } from '#shared/broker/broker.ts';
import { OwnChannels } from '#shared/broker/own-channel.ts';
import type { HttpSend, HttpSendOptions } from '#shared/campaign/http-send.ts';
import type { SendPort } from '#shared/campaign/ports.ts';
import { ChannelClients } from '#shared/channels/clients.ts';
import { type MessageQuota, MessagingApiClient } from '#shared/line/messaging-client.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { BrokerConfig } from './config.ts';

/** Time allowed for one Messaging API request (a send, a quota read). */
const LINE_REQUEST_TIMEOUT_MS = 10_000;

export interface LineChannelSendersDeps {
  readonly channels: OwnChannels;
  /** The send transport of one channel (`PooledHttpSend`; the bench passes its baseline). */
  readonly makeSend: (options: HttpSendOptions) => HttpSend;
  readonly lineApiUrl: string;
  /** Sockets kept open per channel: the message senders' concurrency. */
  readonly maxSockets: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

export class LineChannelSenders {
  readonly #deps: LineChannelSendersDeps;
  readonly #senders: ChannelClients<HttpSend>;

  constructor(deps: LineChannelSendersDeps) {
    this.#deps = deps;
    // The channel changed (a new access token): the old sockets go with the old token.
    this.#senders = new ChannelClients<HttpSend>({
      create: (channel) => {
        deps.logger.info('messaging client ready', { channelId: channel.channelId });
        return deps.makeSend({
          channelAccessToken: channel.accessToken,
          baseUrl: deps.lineApiUrl,
          maxSockets: deps.maxSockets,
          timeoutMs: LINE_REQUEST_TIMEOUT_MS,
          clock: deps.clock,
        });
      },
      close: (http) => http.close(),
    });
  }

  /** The send of the client's channel; refused when the channel is not the client's own. */
  async sendFor(channelId: string, clientId: string): Promise<SendPort> {
    return this.#senders.for(await this.#deps.channels.of(clientId, channelId)).send;
  }

  /** The channel's monthly quota, read through the Messaging API (refused as {@link sendFor} is). */
  async readQuota(channelId: string, clientId: string): Promise<MessageQuota> {
    const channel = await this.#deps.channels.of(clientId, channelId);
    return new MessagingApiClient({
      channelAccessToken: channel.accessToken,
      baseUrl: this.#deps.lineApiUrl,
      timeoutMs: LINE_REQUEST_TIMEOUT_MS,
    }).quota();
  }

  /** Closes every channel's sockets. */
  close(): void {
    this.#senders.close();
  }
}

/**
 * What message jobs need: their tasks (claims fenced by the lease; opt-outs and suppressions checked
 * at claim), the send and quota of the client's own LINE channel, and their settings.
 */
export function messageSide(
  config: BrokerConfig,
  channelsTable: string,
  ports: { readonly doc: DynamoDBDocumentClient; readonly clock: Clock; readonly logger: Logger },
  makeSend: (options: HttpSendOptions) => HttpSend,
) {
  const { doc, clock, logger } = ports;
  const channels = new OwnChannels(new DynamoChannelStore(doc, channelsTable));
  const line = new LineChannelSenders({
    channels,
    makeSend,
    lineApiUrl: config.lineApiUrl,
    maxSockets: config.messages.messageConcurrency,
    clock,
    logger,
  });
  const optOuts = new DynamoOptOutStore(doc, config.controlTable);
  return {
    store: new DynamoMessageTaskStore(doc, {
      controlTable: config.controlTable,
      tasksTable: config.tasksTable,
      clock,
      optedOut: (clientId, recipients) => optOuts.optedOut(clientId, recipients),
      suppressed: claimSuppressions(doc, config.controlTable),
    }),
    sendFor: (channelId: string, clientId: string) => line.sendFor(channelId, clientId),
    readQuota: (channelId: string, clientId: string) => line.readQuota(channelId, clientId),
    settings: config.messages,
    close: () => line.close(),
  } satisfies BrokerDeps['messages'] & { close(): void };
}
