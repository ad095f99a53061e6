/**
 * Tenancy of message channels: a client's message jobs go out only through a LINE channel that is
 * the client's own. A client's settings may name any channel id (`PUT /clients` checks only the
 * id's form: the channel may be registered later), so one naming another client's channel must not
 * send through that client's LINE account (its access token, its quota).
 */
import type { Channel } from '#shared/channels/channel.ts';
import type { ChannelStore } from '#shared/webhooks/ports.ts';
import { BrokerError } from './errors.ts';

/** The channel a client's settings name is not one it may send through. */
export class ChannelNotOwnError extends BrokerError {}

/** Reads the channel a client's message jobs name, and gives it only to the client that owns it. */
export class OwnChannels {
  readonly #store: Pick<ChannelStore, 'get'>;

  constructor(store: Pick<ChannelStore, 'get'>) {
    this.#store = store;
  }

  /**
   * The channel `channelId`, read now (a channel may change hands or tokens between rounds);
   * throws {@link ChannelNotOwnError} when it does not exist or is another client's.
   */
  async of(clientId: string, channelId: string): Promise<Channel> {
    const channel = await this.#store.get(channelId);
    if (!channel) throw new ChannelNotOwnError(`the client's message channel ${channelId} does not exist`);
    if (channel.clientId !== clientId)
      throw new ChannelNotOwnError(
        `the message channel ${channelId} is not client ${clientId}'s: nothing is sent through it`,
      );
    return channel;
  }
}
