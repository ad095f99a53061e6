/**
 * A contact's user-defined attributes from Amazon Connect: `GetContactAttributes`
 * (`GET /contact/attributes/{InstanceId}/{InitialContactId}`, REST-JSON), through one SDK client
 * per region (the region and the instance come from the event's instance ARN).
 */
import { type ConnectClient, GetContactAttributesCommand } from '@aws-sdk/client-connect';
import type { ContactAttributesReader } from '#shared/broker/contact-opt-outs.ts';
import { oncePerKey } from '#shared/caches.ts';
import { connectInstanceOf } from '#shared/telephony/connect-contact.ts';

/** A contact's attributes from Amazon Connect, one SDK client a region. */
export class ConnectContactAttributes implements ContactAttributesReader {
  readonly #client: (region: string) => ConnectClient;

  constructor(clientFor: (region: string) => ConnectClient) {
    this.#client = oncePerKey(clientFor);
  }

  async read(
    instanceArn: string,
    initialContactId: string,
  ): Promise<Readonly<Record<string, string>> | undefined> {
    const instance = connectInstanceOf(instanceArn);
    if (!instance) return undefined;
    try {
      const out = await this.#client(instance.region).send(
        new GetContactAttributesCommand({
          InstanceId: instance.instanceId,
          InitialContactId: initialContactId,
        }),
      );
      return out.Attributes ?? {};
    } catch (error) {
      // Any other error is thrown: the event is retried (Lambda's asynchronous retries).
      if ((error as { name?: string }).name === 'ResourceNotFoundException') return undefined;
      throw error;
    }
  }
}
