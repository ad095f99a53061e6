/**
 * The paths of End User Messaging SMS's events into Switchboard, stated once for the stack
 * (`cdk/constructs/sms-events.ts`, `cdk/constructs/sms-inbound.ts`) and the local cloud
 * (`local/sms-wiring.ts`): the configuration set texts name and the event types its destination
 * publishes, and the two SNS topics (delivery events; customers' texts back, two-way SMS), each
 * with an SQS queue subscribed with raw message delivery, read by a Lambda in batches.
 *
 * A configuration set's event destination is CloudWatch Logs, Amazon Data Firehose or Amazon SNS
 * (CreateEventDestination, https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_CreateEventDestination.html;
 * "Create an Amazon SNS event destination",
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-sns-add.html). SNS → SQS
 * → Lambda in batches is the one that hands each event to code at a queue's price: CloudWatch Logs
 * would need a subscription filter invoking per log batch and charges ingestion per GB, Firehose
 * delivers to stores (S3, HTTP), not to a function. A phone number's two-way channel is an SNS topic
 * too (its payload: https://docs.aws.amazon.com/sms-voice/latest/userguide/two-way-sms-payload.html;
 * its topic and key policies: https://docs.aws.amazon.com/sms-voice/latest/userguide/two-way-sms-iam-policy-auto.html).
 */
import { resourceName } from '#shared/resources.ts';
import { SMS_TRACKED_EVENT_TYPES } from './sms-events.ts';

/** The event types the destination publishes: those that move a task's SMS state (`./sms-events.ts`). */
export const SMS_EVENT_TYPES: readonly string[] = SMS_TRACKED_EVENT_TYPES;

/** The stage's configuration set (`switchboard-{stage}-sms`): the one texts name unless a client names its own. */
export function smsConfigurationSetName(stage: string): string {
  return resourceName(stage, 'sms');
}

/** The topic the configuration set's events are published to. */
export function smsEventsTopicName(stage: string): string {
  return resourceName(stage, 'sms-events');
}

/** The topic clients' origination numbers publish their customers' texts to (their two-way channel). */
export function smsInboundTopicName(stage: string): string {
  return resourceName(stage, 'sms-inbound');
}
