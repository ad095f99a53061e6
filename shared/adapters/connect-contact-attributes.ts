/**
 * A contact's user-defined attributes from Amazon Connect: `GetContactAttributes`
 * (`GET /contact/attributes/{InstanceId}/{InitialContactId}`, REST-JSON), through one SDK client
 * per region (the region and the instance come from the event's instance ARN).
 */
import { type ConnectClient, GetContactAttributesCommand } from '@aws-sdk/client-connect';
import type { ContactAttributesReader } from '#shared/broker/contact-opt-outs.ts';
import { oncePerKey } from '#shared/caches.ts';
import { connectInstanceOf } from '#shared/telephony/connect-contact.ts';

export function makeConnectContactAttributes(
  clientFor: (region: string) => ConnectClient,
): ContactAttributesReader {
  const client = oncePerKey(clientFor);
  return {
    async read(instanceArn, initialContactId) {
      const instance = connectInstanceOf(instanceArn);
      if (!instance) return undefined;
      try {
        const out = await client(instance.region).send(
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
    },
  };
}
