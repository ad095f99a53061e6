/**
 * The provider of each client's calls, built from the client's `telephony` settings and kept per
 * client while its settings stay the same (for the 1,000 clients served last): Amazon Connect
 * through one SDK client per region, the HTTP contract at the client's base URL, or the
 * deployment's default HTTP provider.
 */
import type { ConnectClient } from '@aws-sdk/client-connect';
import type { CallLinkStore } from '#shared/broker/ports.ts';
import { oncePerKey, VersionedCache } from '#shared/caches.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import { HttpTelephonyProvider } from '#shared/telephony/http-provider.ts';
import type { TelephonyProvider, TelephonyProviders } from '#shared/telephony/port.ts';
import type { TelephonySettings } from '#shared/telephony/settings.ts';
import { TWILIO_API_URL } from '#shared/telephony/twilio.ts';
import { ConnectTelephonyProvider } from './connect-telephony.ts';
import { TwilioTelephonyProvider } from './twilio-telephony.ts';

export interface TelephonyProvidersConfig {
  /** The deployment's HTTP provider: clients without `telephony` settings, and the token of `http` ones. */
  readonly http: { readonly baseUrl: string; readonly apiToken: string };
  /** An Amazon Connect client for a region (the stack's when undefined). */
  readonly connect: (region: string | undefined) => ConnectClient;
  /**
   * Each client's own telephony secret (its Twilio auth token, its HTTP provider's bearer token),
   * stored encrypted (`ClientTelephonySecrets`); undefined when the client has none.
   */
  readonly clientSecret: (clientId: string) => Promise<string | undefined>;
  /** Twilio's API (default `https://api.twilio.com`) and the public URL of its status route. */
  readonly twilio: {
    readonly apiUrl?: string;
    readonly callbackUrl: string;
    readonly lookupSettleMs?: number;
  };
  /** Call links, for Twilio's lookups after an ambiguous create. */
  readonly links?: Pick<CallLinkStore, 'find'>;
  readonly clock: Clock;
}

/**
 * Clients whose providers a process keeps at most: far more than a broker serves at once (a
 * provider is asked for once per lease), so only a client not served for a long while is dropped.
 */
const MAX_CLIENT_PROVIDERS = 1_000;

export function makeTelephonyProviders(config: TelephonyProvidersConfig): TelephonyProviders {
  // By client, at its settings; a provider holds no sockets of its own, so an evicted one needs no close.
  const byClient = new VersionedCache<TelephonyProvider>({ maxEntries: MAX_CLIENT_PROVIDERS });
  const connectClient = oncePerKey((region: string | undefined) => config.connect(region));
  const fallback = new HttpTelephonyProvider({ ...config.http, clock: config.clock });

  function build(clientId: string, settings: TelephonySettings): TelephonyProvider {
    switch (settings.provider) {
      case 'connect':
        return new ConnectTelephonyProvider(connectClient(settings.region), settings);
      case 'twilio':
        return new TwilioTelephonyProvider({
          settings,
          apiUrl: config.twilio.apiUrl ?? TWILIO_API_URL,
          callbackUrl: config.twilio.callbackUrl,
          ...(config.twilio.lookupSettleMs === undefined
            ? {}
            : { lookupSettleMs: config.twilio.lookupSettleMs }),
          clientId,
          authToken: () => config.clientSecret(clientId),
          ...(config.links ? { links: config.links } : {}),
          clock: config.clock,
        });
      case 'http':
        return new HttpTelephonyProvider({
          baseUrl: settings.baseUrl,
          // The client's own token when it stored one, the deployment's otherwise.
          apiToken: async () => (await config.clientSecret(clientId)) ?? config.http.apiToken,
          clock: config.clock,
        });
      default:
        return unavailable(`provider ${(settings as { provider: string }).provider} is not available`);
    }
  }

  return {
    forClient(clientId, settings) {
      if (!settings) return fallback;
      return byClient.get(clientId, JSON.stringify(settings), () => build(clientId, settings));
    },
  };
}

/** A provider that refuses every call with `message`: the task fails with it, nothing rings. */
function unavailable(message: string): TelephonyProvider {
  return {
    initiate: async () => ({ kind: 'rejected', status: 501, code: 'provider_unavailable', message }),
    getCall: async () => undefined,
  };
}
