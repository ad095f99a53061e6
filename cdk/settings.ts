/**
 * The deployment's settings, from CDK context (`-c name=value` or `cdk.json`), validated once.
 * The `local` stage (the default in `cdk.json`) is what `npm run synth` and `npm test` synthesize:
 * a template checked offline, never meant for `cdk deploy`, so placeholders are allowed there. Any
 * other stage must name the real telephony API, or synth fails before anything is deployed.
 */
import type { Node } from 'constructs';
import { resourceName } from '#shared/resources.ts';
import { LOCAL_CONNECT_INSTANCE_ID } from '#shared/telephony/settings.ts';

export const LOCAL_STAGE = 'local';
/** The placeholder a `local` template carries where a real stage names its provider. */
export const PLACEHOLDER_TELEPHONY_API_URL = 'https://telephony.example.com';

export interface DeploySettings {
  readonly stage: string;
  readonly telephonyProvider: string;
  readonly telephonyApiUrl: string;
  readonly maxBrokers: number;
  /** Origins (a console's) from which browsers may PUT lists to presigned URLs; none by default. */
  readonly uploadOrigins: readonly string[];
  /**
   * Amazon Connect instances clients may call through (ids; their ARNs are in the stack's region):
   * the brokers may start, describe and stop contacts of these only, and their contact events go
   * to the connect-events function. `local` synthesizes the local emulator's instance.
   */
  readonly connectInstanceIds: readonly string[];
  /**
   * The public URL Twilio calls with status callbacks (and signs), when it is not the API's own
   * (a custom domain); default: the API's URL + `/providers/twilio/calls/status`.
   */
  readonly twilioCallbackUrl?: string;
  /** Keep tables, queues, the bucket, secrets and logs when the stack is deleted. */
  readonly retain: boolean;
}

export class DeploySettingsError extends Error {
  override name = 'DeploySettingsError';
}

/** Reads and checks the settings; throws a {@link DeploySettingsError} naming the context key. */
export function readDeploySettings(node: Node): DeploySettings {
  const context = (key: string): string | undefined => {
    const value = node.tryGetContext(key);
    return value === undefined || value === null || value === '' ? undefined : String(value);
  };
  const stage = context('stage') ?? LOCAL_STAGE;
  try {
    resourceName(stage, 'check');
  } catch (error) {
    throw new DeploySettingsError(`-c stage: ${(error as Error).message}`);
  }
  const local = stage === LOCAL_STAGE;
  const telephonyApiUrl = context('telephonyApiUrl') ?? (local ? PLACEHOLDER_TELEPHONY_API_URL : undefined);
  if (!telephonyApiUrl) {
    throw new DeploySettingsError(
      `stage "${stage}": -c telephonyApiUrl=https://… is required (the telephony provider's API base URL); only the "${LOCAL_STAGE}" stage, which is synthesized for checks and never deployed, may leave it out`,
    );
  }
  let url: URL;
  try {
    url = new URL(telephonyApiUrl);
  } catch {
    throw new DeploySettingsError(`-c telephonyApiUrl: not a URL: ${JSON.stringify(telephonyApiUrl)}`);
  }
  if (!local && (url.protocol !== 'https:' || /(^|\.)example\.(com|org|net)$/.test(url.hostname))) {
    throw new DeploySettingsError(
      `stage "${stage}": -c telephonyApiUrl must be the provider's real https URL, got ${JSON.stringify(telephonyApiUrl)}`,
    );
  }
  const maxBrokers = Number(context('maxBrokers') ?? 10);
  if (!Number.isInteger(maxBrokers) || maxBrokers < 1 || maxBrokers > 1000) {
    throw new DeploySettingsError(
      `-c maxBrokers: a whole number from 1 to 1000, got ${context('maxBrokers')}`,
    );
  }
  const telephonyProvider = context('telephonyProvider') ?? 'default';
  if (!/^[a-z0-9-]{1,40}$/.test(telephonyProvider)) {
    throw new DeploySettingsError(
      `-c telephonyProvider: lower-case letters, digits and '-', got ${JSON.stringify(telephonyProvider)}`,
    );
  }
  if (telephonyProvider === 'twilio') {
    throw new DeploySettingsError(
      '-c telephonyProvider names the HTTP-contract provider; "twilio" is built in: set a client\'s telephony to { "provider": "twilio", … } instead',
    );
  }
  const uploadOrigins = (context('uploadOrigins') ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  for (const origin of uploadOrigins) {
    if (!/^https?:\/\/[a-z0-9.-]+(:\d+)?$/i.test(origin)) {
      throw new DeploySettingsError(
        `-c uploadOrigins: comma-separated origins such as https://console.example.org, got ${JSON.stringify(origin)}`,
      );
    }
  }
  const connectInstanceIds = (context('connectInstanceIds') ?? (local ? LOCAL_CONNECT_INSTANCE_ID : ''))
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  for (const id of connectInstanceIds) {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
      throw new DeploySettingsError(
        `-c connectInstanceIds: comma-separated Amazon Connect instance ids (UUIDs, the end of the instance ARN), got ${JSON.stringify(id)}`,
      );
    }
  }
  const twilioCallbackUrl = context('twilioCallbackUrl');
  if (
    twilioCallbackUrl !== undefined &&
    !/^https:\/\/[^\s?#]+\/providers\/twilio\/calls\/status$/.test(twilioCallbackUrl)
  ) {
    throw new DeploySettingsError(
      `-c twilioCallbackUrl: the public https URL of the Twilio status route, ending /providers/twilio/calls/status, got ${JSON.stringify(twilioCallbackUrl)}`,
    );
  }
  return {
    stage,
    telephonyProvider,
    telephonyApiUrl,
    maxBrokers,
    uploadOrigins,
    connectInstanceIds,
    ...(twilioCallbackUrl === undefined ? {} : { twilioCallbackUrl }),
    retain: stage === 'prod',
  };
}
