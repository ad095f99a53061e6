/**
 * The path of SES's sending events into Switchboard, stated once for the stack
 * (`cdk/constructs/email-events.ts`) and the local cloud (`local/email-wiring.ts`): the configuration
 * set the broker's emails name, the event types its EventBridge destination publishes to the default
 * bus, and the rule that hands them to the email-events function.
 *
 * The rule matches the configuration set's own events only (`detail.mail.tags.ses:configuration-set`,
 * a tag SES adds to every event of an email sent with a configuration set): another set of the
 * account publishing to the same bus reaches nothing of Switchboard's.
 *
 * Sources: https://docs.aws.amazon.com/ses/latest/dg/monitoring-eventbridge.html (the detail-types,
 * the default bus), https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_EventDestination.html
 * (`MatchingEventTypes`), https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-firehose-contents.html
 * (the automatic `ses:configuration-set` tag).
 */
import { resourceName } from '#shared/resources.ts';

/**
 * The event types the destination publishes (SES v2's `EventType` names): those that move an email's
 * state (`shared/email/ses-events.ts`). OPEN, CLICK and SUBSCRIPTION are left out: nothing of a
 * task depends on them, and each would cost an invocation.
 */
export const EMAIL_EVENT_TYPES = [
  'SEND',
  'DELIVERY',
  'BOUNCE',
  'COMPLAINT',
  'REJECT',
  'DELIVERY_DELAY',
  'RENDERING_FAILURE',
] as const;
export type EmailEventType = (typeof EMAIL_EVENT_TYPES)[number];

/** Each published type's `detail-type` on the bus. */
export const EMAIL_EVENT_DETAIL_TYPES: Readonly<Record<EmailEventType, string>> = {
  SEND: 'Email Sent',
  DELIVERY: 'Email Delivered',
  BOUNCE: 'Email Bounced',
  COMPLAINT: 'Email Complaint Received',
  REJECT: 'Email Rejected',
  DELIVERY_DELAY: 'Email Delivery Delayed',
  RENDERING_FAILURE: 'Email Rendering Failed',
};

/** The tag SES adds to every event of an email sent with a configuration set, naming the set. */
export const CONFIGURATION_SET_TAG = 'ses:configuration-set';

/** The stage's configuration set (`switchboard-{stage}-email`): the broker's default, `SES_CONFIGURATION_SET`. */
export function emailConfigurationSetName(stage: string): string {
  return resourceName(stage, 'email');
}

/** The EventBridge rule's pattern: SES's events of the types above, of `configurationSet` only. */
export function emailEventPattern(configurationSet: string) {
  return {
    source: ['aws.ses'],
    detailType: EMAIL_EVENT_TYPES.map((type) => EMAIL_EVENT_DETAIL_TYPES[type]),
    detail: { mail: { tags: { [CONFIGURATION_SET_TAG]: [configurationSet] } } },
  };
}

/** Whether the rule of {@link emailEventPattern} matches `event`, as EventBridge decides it (the local cloud's router). */
export function matchesEmailEventRule(event: unknown, configurationSet: string): boolean {
  if (typeof event !== 'object' || event === null) return false;
  const { source, 'detail-type': detailType, detail } = event as Record<string, unknown>;
  if (source !== 'aws.ses' || typeof detailType !== 'string') return false;
  if (!Object.values(EMAIL_EVENT_DETAIL_TYPES).includes(detailType)) return false;
  const mail = (detail as { mail?: { tags?: Record<string, unknown> } } | undefined)?.mail;
  const values = mail?.tags?.[CONFIGURATION_SET_TAG];
  // A pattern's value list matches an array in the event when any element matches.
  return Array.isArray(values) ? values.includes(configurationSet) : values === configurationSet;
}
