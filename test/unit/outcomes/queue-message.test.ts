import { describe, expect, it } from 'vitest';
import type { OutcomeDelivery } from '#shared/outcomes/ports.ts';
import { encodeOutcomeDelivery, parseOutcomeDelivery } from '#shared/outcomes/queue-message.ts';

describe('the outcome-webhooks queue message', () => {
  it('reads back the delivery it was written from', () => {
    const delivery = { clientId: 'acme', events: [] } satisfies OutcomeDelivery;
    expect(parseOutcomeDelivery(encodeOutcomeDelivery(delivery))).toEqual(delivery);
  });

  it('is no delivery when the body is not JSON, names no client or carries no events', () => {
    for (const body of [
      'not json',
      'null',
      '{"events":[]}',
      '{"clientId":"acme"}',
      '{"clientId":"acme","events":{}}',
    ]) {
      expect(parseOutcomeDelivery(body)).toBeUndefined();
    }
  });
});
