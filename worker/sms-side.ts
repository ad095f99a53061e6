/**
 * The broker's SMS side: a client's End User Messaging SMS transport (`shared/adapters/
 * sms-transport.ts`) over one SMS client for the process. An origination identity's rate is counted
 * in message parts per second (MPS) and is the identity's, whoever sends from it: every client this
 * process sends for from one identity takes its parts from one {@link SharedRate}, at the rate the
 * client's settings give (`partsPerSecond`; the console's "Messaging limits" of the identity).
 * Brokers do not split an identity's rate between them (an identity normally serves one client,
 * and a client is served by one broker at a time); one shared by clients on two brokers at once is
 * answered with `ThrottlingException`, which the pipeline waits out and retries.
 */
import type { PinpointSMSVoiceV2Client } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import { boundedRequests, makeSmsClient, SEND_REQUEST_BOUNDS } from '#shared/adapters/aws-clients.ts';
import { SmsTransport, smsRateBurst } from '#shared/adapters/sms-transport.ts';
import type { SmsSide } from '#shared/broker/broker.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { SharedRate } from '#shared/pacing/shared-rate.ts';
import { DEFAULT_PARTS_PER_SECOND } from '#shared/sms/settings.ts';
import type { BrokerConfig } from './config.ts';

/** One rate per origination identity for the process, at the rate its latest client named. */
class IdentityRates {
  readonly #rates = new Map<string, SharedRate>();
  readonly #ports: { readonly clock: Clock; readonly timers: Timers };

  constructor(ports: { readonly clock: Clock; readonly timers: Timers }) {
    this.#ports = ports;
  }

  of(identity: string, partsPerSecond: number): SharedRate {
    const burst = smsRateBurst(partsPerSecond);
    const known = this.#rates.get(identity);
    if (known) {
      known.retune(partsPerSecond, burst);
      return known;
    }
    const rate = new SharedRate({ perSecond: partsPerSecond, burst, ...this.#ports });
    this.#rates.set(identity, rate);
    return rate;
  }
}

/** SMS jobs, when the deployment names its configuration set (`SMS_CONFIGURATION_SET`). */
export function smsSide(
  config: BrokerConfig,
  ports: { readonly clock: Clock; readonly timers: Timers },
  sms: PinpointSMSVoiceV2Client = makeSmsClient({ requestHandler: boundedRequests(SEND_REQUEST_BOUNDS) }),
): SmsSide | undefined {
  const side = config.sms;
  if (!side) return undefined;
  const rates = new IdentityRates(ports);
  return {
    settings: side.settings,
    transportFor: async (client) => {
      const settings = client.sms!;
      const partsPerSecond = settings.partsPerSecond ?? DEFAULT_PARTS_PER_SECOND;
      return new SmsTransport({
        sms,
        clientId: client.clientId,
        settings,
        defaultConfigurationSet: side.configurationSet,
        partsPerSecond,
        sharedParts: rates.of(settings.originationIdentity, partsPerSecond),
      });
    },
  };
}
