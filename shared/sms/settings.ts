/**
 * A client's SMS settings: where its texts come from and how End User Messaging SMS sends them.
 * Sources: SendTextMessage in the End User Messaging SMS API reference
 * (https://docs.aws.amazon.com/pinpoint/latest/apireference_smsvoicev2/API_SendTextMessage.html).
 */
export interface SmsSettings {
  /**
   * The origination identity every text is sent from: a phone number, a sender ID or a pool, by its
   * id, ARN or the number itself (its rate, in message parts per second, is the identity's).
   */
  readonly originationIdentity: string;
  /**
   * The identity's send rate in message parts per second (MPS), as its "Messaging limits" tab in the
   * End User Messaging SMS console shows it (`MessagingLimits.RateLimits.SMS` in the API). Default
   * {@link DEFAULT_PARTS_PER_SECOND}: the lowest rate of any identity (a US long code), never too fast.
   */
  readonly partsPerSecond?: number;
  /** `TRANSACTIONAL` (default: reminders, notices) or `PROMOTIONAL` (campaigns), as the carriers route them. */
  readonly messageType?: 'TRANSACTIONAL' | 'PROMOTIONAL';
  /**
   * What a send the service did not answer, and of which no event came, becomes: `at-most-once`
   * (default): the task ends `in-doubt`; `at-least-once`: it is sent once more.
   */
  readonly delivery?: 'at-most-once' | 'at-least-once';
}

/** An identity's rate when the client's settings give none: 1 part a second (see `partsPerSecond`). */
export const DEFAULT_PARTS_PER_SECOND = 1;

/**
 * The `Context` keys every text carries (at most 5 are allowed): its delivery events carry them
 * back, naming the task and the attempt they are about, as an email's tags do.
 */
export const SMS_CONTEXT = {
  client: 'sb-client',
  job: 'sb-job',
  task: 'sb-task',
  attempt: 'sb-attempt',
} as const;
