/**
 * The broker's email side: a client's SES transport (`shared/adapters/ses-transport.ts`) over one
 * SES v2 client for the process. SES's rate is the account's in the region, so every client this
 * broker sends for takes from one process-wide {@link SharedRate}, kept at this broker's share of
 * the account's rate as `GetAccount` reads it (read again every {@link ACCOUNT_READ_MS}): split
 * among the brokers sending email at once (`shared/email/send-rate-share.ts`), times
 * `SES_RATE_SHARE` (the deployment's part of an account it shares with other senders).
 */
import type { SESv2Client } from '@aws-sdk/client-sesv2';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  boundedRequests,
  makeSecretsManagerClient,
  makeSesClient,
  SEND_REQUEST_BOUNDS,
} from '#shared/adapters/aws-clients.ts';
import { DynamoEmailSenders } from '#shared/adapters/dynamo-email-senders.ts';
import {
  readSesAccount,
  SES_BULK_DESTINATIONS,
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
import { defaultBurst } from '#shared/campaign/send-pacer.ts';
import { SendRateShare } from '#shared/email/send-rate-share.ts';
import type { Logger } from '#shared/log.ts';
import type { Clock, Timers } from '#shared/pacing/clock.ts';
import { SharedRate } from '#shared/pacing/shared-rate.ts';
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
  ports: {
    readonly clock: Clock;
    readonly timers: Timers;
    readonly logger: Logger;
    readonly doc: DynamoDBDocumentClient;
  },
  ses: SESv2Client = makeSesClient({ requestHandler: boundedRequests(SEND_REQUEST_BOUNDS) }),
  env: NodeJS.ProcessEnv = process.env,
): (EmailSide & { close(): Promise<void> }) | undefined {
  const email = config.email;
  if (!email) return undefined;
  const account = new AccountRate(ses, ports.clock);
  const accountRate = async () => (await account.read()).maxSendRate * email.rateShare;
  // Until the first refresh: the smallest rate SES grants (the sandbox's 1/s), never more than the share.
  const rate = new SharedRate({ perSecond: 1, burst: 1, clock: ports.clock, timers: ports.timers });
  const share = new SendRateShare({
    senders: new DynamoEmailSenders(ports.doc, config.tasksTable),
    brokerId: config.broker.brokerId,
    rate,
    accountRate,
    burstOf: (perSecond) => defaultBurst(perSecond, SES_BULK_DESTINATIONS) ?? 1,
    clock: ports.clock,
    timers: ports.timers,
    logger: ports.logger,
  });
  let sharing = false;
  const keyring = env[UNSUBSCRIBE_BASE_URL_ENV]
    ? UnsubscribeKeyring.fromEnvironment(env, () => makeSecretsManagerClient(), ports)
    : undefined;
  return {
    settings: email.settings,
    transportFor: async (client) => {
      const perSecond = Math.max(0.1, await accountRate());
      // Sending again after a lull: say so now, so the split counts this broker from the start.
      if (!sharing || share.idle)
        await share.refresh(true).catch((error) => {
          ports.logger.warn('the share of SES’s sending rate was not refreshed', { error });
        });
      if (!sharing) share.start();
      sharing = true;
      const unsubscribeUrl = await unsubscribeLinks(env, keyring);
      return new SesTransport({
        ses,
        clientId: client.clientId,
        settings: client.email!,
        defaultConfigurationSet: email.configurationSet,
        // The pipeline's own lane keeps to the account's rate; the shared rate to this broker's share.
        ratePerSecond: perSecond,
        sharedRate: rate,
        ...(unsubscribeUrl ? { unsubscribeUrl } : {}),
      });
    },
    close: () => share.stop(),
  };
}
