/**
 * The broker's email side: a client's SES transport (`shared/adapters/ses-transport.ts`) over one
 * SES v2 client for the process, paced at the account's sending rate as `GetAccount` reads it (read
 * again every {@link ACCOUNT_READ_MS}), times this broker's share of it (`SES_RATE_SHARE`: SES's
 * rate is the account's in the region, so brokers that send email at once must split it).
 */
import type { SESv2Client } from '@aws-sdk/client-sesv2';
import { makeSecretsManagerClient, makeSesClient } from '#shared/adapters/aws-clients.ts';
import {
  readSesAccount,
  type SesAccountReading,
  SesTransport,
  type SesTransportOptions,
} from '#shared/adapters/ses-transport.ts';
import {
  UNSUBSCRIBE_BASE_URL_ENV,
  UnsubscribeKeyring,
  unsubscribeUrl,
} from '#shared/adapters/unsubscribe-secret.ts';
import type { EmailSide } from '#shared/broker/broker.ts';
import type { Clock } from '#shared/pacing/clock.ts';
import type { BrokerConfig } from './config.ts';

/** How long a reading of the account's rate is used. */
export const ACCOUNT_READ_MS = 5 * 60_000;

/** The account's rate, read at most every {@link ACCOUNT_READ_MS}. */
class AccountRate {
  readonly #ses: SESv2Client;
  readonly #clock: Clock;
  #reading: { at: number; value: Promise<SesAccountReading> } | undefined;

  constructor(ses: SESv2Client, clock: Clock) {
    this.#ses = ses;
    this.#clock = clock;
  }

  async read(): Promise<SesAccountReading> {
    const now = this.#clock.now();
    if (!this.#reading || now - this.#reading.at >= ACCOUNT_READ_MS) {
      const value = readSesAccount(this.#ses);
      this.#reading = { at: now, value };
      // A failed read is not kept: the next round asks again.
      value.catch(() => {
        if (this.#reading?.value === value) this.#reading = undefined;
      });
    }
    return this.#reading.value;
  }
}

/**
 * The one-click unsubscribe link of a recipient (RFC 8058), when the deployment has the route
 * (`UNSUBSCRIBE_BASE_URL`), signed with the keys the route verifies with.
 */
async function unsubscribeLinks(
  env: NodeJS.ProcessEnv,
  keyring: UnsubscribeKeyring | undefined,
): Promise<SesTransportOptions['unsubscribeUrl']> {
  const base = env[UNSUBSCRIBE_BASE_URL_ENV];
  if (!base || !keyring) return undefined;
  const tokens = await keyring.tokens();
  return (request) => unsubscribeUrl(base, tokens.sign(request));
}

/** Email jobs, when the deployment names its configuration set (`SES_CONFIGURATION_SET`). */
export function emailSide(
  config: BrokerConfig,
  ports: { readonly clock: Clock },
  ses: SESv2Client = makeSesClient(),
  env: NodeJS.ProcessEnv = process.env,
): EmailSide | undefined {
  const email = config.email;
  if (!email) return undefined;
  const account = new AccountRate(ses, ports.clock);
  const keyring = env[UNSUBSCRIBE_BASE_URL_ENV]
    ? UnsubscribeKeyring.fromEnvironment(env, () => makeSecretsManagerClient(), ports)
    : undefined;
  return {
    settings: email.settings,
    transportFor: async (client) => {
      const reading = await account.read();
      const unsubscribeUrl = await unsubscribeLinks(env, keyring);
      return new SesTransport({
        ses,
        clientId: client.clientId,
        settings: client.email!,
        defaultConfigurationSet: email.configurationSet,
        ratePerSecond: Math.max(0.1, reading.maxSendRate * email.rateShare),
        ...(unsubscribeUrl ? { unsubscribeUrl } : {}),
      });
    },
  };
}
