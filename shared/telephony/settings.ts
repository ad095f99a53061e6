/**
 * Which telephony provider a client's calls go through, and that provider's non-secret settings.
 * Absent from a client, its calls go to the deployment's default provider (the HTTP contract of
 * `docs/telephony-provider.md`, at `TELEPHONY_API_URL`). Secrets (a Twilio auth token, an HTTP
 * bearer token) are never part of these settings: they are never returned by a route.
 */
import { z } from 'zod';

const E164 = /^\+[1-9]\d{1,14}$/;
const CONNECT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const AWS_REGION = /^[a-z]{2}(-gov)?-[a-z]+-\d$/;

/** Amazon Connect: outbound calls with `StartOutboundVoiceContact`, call ends from contact events. */
export interface ConnectSettings {
  readonly provider: 'connect';
  /** The Connect instance's id (the last part of its ARN). */
  readonly instanceId: string;
  /** The contact flow an answered call runs (the voice bot). */
  readonly contactFlowId: string;
  /** Caller id, E.164, claimed in the instance; or the queue's outbound caller id. */
  readonly sourcePhoneNumber?: string;
  readonly queueId?: string;
  /** Answering-machine detection: a machine ends the call as `voicemail`. */
  readonly answeringMachineDetection?: boolean;
  /**
   * The instance's region. It must be the deployment's own ({@link foreignConnectRegion}): the
   * broker's role may start contacts, and the contact-event rule hears of them, only there.
   */
  readonly region?: string;
}

/** Twilio Programmable Voice: `Calls.json`, signed status callbacks. */
export interface TwilioSettings {
  readonly provider: 'twilio';
  readonly accountSid: string;
  /** Caller id, E.164, a number of the account (or a verified caller id). */
  readonly from: string;
  /** What an answered call does: the TwiML App's SID (`AP…`) … */
  readonly applicationSid?: string;
  /** … or the URL Twilio fetches TwiML from (the voice bot). */
  readonly voiceUrl?: string;
  /** Twilio's `MachineDetection`: a machine ends the call as `voicemail`. */
  readonly machineDetection?: 'Enable' | 'DetectMessageEnd';
}

/** The HTTP contract (`docs/telephony-provider.md`) at a base URL of the client's own. */
export interface HttpProviderSettings {
  readonly provider: 'http';
  readonly baseUrl: string;
}

export type TelephonySettings = ConnectSettings | TwilioSettings | HttpProviderSettings;

const connectSchema = z
  .strictObject({
    provider: z.literal('connect'),
    instanceId: z.string().regex(CONNECT_ID, 'must be the instance id, a UUID (the end of its ARN)'),
    contactFlowId: z.string().regex(CONNECT_ID, 'must be the contact flow id, a UUID'),
    sourcePhoneNumber: z.string().regex(E164, 'must be an E.164 number such as +815012345678').optional(),
    queueId: z.string().regex(CONNECT_ID, 'must be the queue id, a UUID').optional(),
    answeringMachineDetection: z.boolean().optional(),
    region: z.string().regex(AWS_REGION, 'must be an AWS region such as ap-northeast-1').optional(),
  })
  .superRefine((value, ctx) => {
    if (value.sourcePhoneNumber === undefined && value.queueId === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['sourcePhoneNumber'],
        message: 'give sourcePhoneNumber or queueId: Connect needs a caller id',
      });
    }
  });

const twilioSchema = z
  .strictObject({
    provider: z.literal('twilio'),
    accountSid: z.string().regex(/^AC[0-9a-f]{32}$/, 'must be the account SID: AC and 32 hex digits'),
    from: z.string().regex(E164, 'must be an E.164 number of the account, such as +815012345678'),
    applicationSid: z
      .string()
      .regex(/^AP[0-9a-f]{32}$/, 'must be a TwiML App SID: AP and 32 hex digits')
      .optional(),
    voiceUrl: z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL' }).optional(),
    machineDetection: z.enum(['Enable', 'DetectMessageEnd']).optional(),
  })
  .superRefine((value, ctx) => {
    if ((value.applicationSid === undefined) === (value.voiceUrl === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['voiceUrl'],
        message: 'give exactly one of voiceUrl or applicationSid: what an answered call runs',
      });
    }
  });

const httpSchema = z.strictObject({
  provider: z.literal('http'),
  baseUrl: z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL' }),
});

/** The `telephony` member of a client's settings; errors are reported by field path. */
export const telephonySettingsSchema = z.discriminatedUnion(
  'provider',
  [connectSchema, twilioSchema, httpSchema],
  { error: 'provider must be one of connect, twilio, http' },
);

/**
 * The Amazon Connect instance the local cloud's emulator serves (`local/connect-emulator.ts`); the
 * `local` stage's template grants it, so the IAM conformance check covers the Connect calls.
 */
export const LOCAL_CONNECT_INSTANCE_ID = '00000000-0000-4000-8000-0000000c0c0c';

/** Seconds Connect lets a call ring (`RingTimeoutInSeconds`). */
export const CONNECT_RING_TIMEOUT = { min: 15, max: 60 } as const;

/**
 * Why `settings` cannot be served by a deployment in `deploymentRegion`, or undefined when they
 * can: an Amazon Connect instance in another region. The stack grants `connect:*Contact` on its
 * own region's instances and its contact-event rule listens on its own region's EventBridge bus, so
 * such a client's calls would be refused (AccessDenied) and their ends never heard of. Refused when
 * the settings are written, with this reason, rather than found one call at a time.
 */
export function foreignConnectRegion(
  settings: TelephonySettings | undefined,
  deploymentRegion: string,
): string | undefined {
  if (settings?.provider !== 'connect' || settings.region === undefined) return undefined;
  if (settings.region === deploymentRegion) return undefined;
  return `must be this deployment's region (${deploymentRegion}) or left out: Switchboard starts Amazon Connect calls and hears of their ends only in its own region; deploy a stack in ${settings.region} for an instance there`;
}
