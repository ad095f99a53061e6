/**
 * A text a customer sends back to an origination number (two-way SMS), as End User Messaging SMS
 * publishes it to the number's SNS topic, read for what Switchboard does with it: an opt-out keyword
 * puts the sender's number on the client's suppression list (source `stop`), an opt-in keyword says
 * they want texts again, anything else is only a reply.
 *
 * The payload (user guide, "Example of a two-way SMS message payload for Amazon SNS topics",
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/two-way-sms-payload.html):
 * `originationNumber` (the customer's number), `destinationNumber` (ours), `messageKeyword` (the
 * registered keyword the text matched, if any), `messageBody`, `inboundMessageId`,
 * `previousPublishedMessageId`.
 *
 * The opt-out keywords are the service's required ones ("Required opt-out keywords",
 * https://docs.aws.amazon.com/sms-voice/latest/userguide/keywords-required.html: ARRET, CANCEL, END,
 * OPT-OUT, OPTOUT, QUIT, REMOVE, STOP, TD, UNSUBSCRIBE), matched case-insensitively on the text's
 * first word as keywords are, plus STOPALL; the opt-in ones UNSTOP and START ("a user can resubscribe
 * by sending … UNSTOP or START"). The service keeps its own opt-out list too, and refuses a send to
 * a number on it: Switchboard's list is what makes the opt-out hold across its channels and clients'
 * jobs before a send is tried.
 *
 * Pure: no AWS SDK; never throws.
 */
import { snsPayload } from './sns-body.ts';

/** The service's required opt-out keywords, and STOPALL (the stand-in answers to the same). */
export const OPT_OUT_KEYWORDS: ReadonlySet<string> = new Set([
  'ARRET',
  'CANCEL',
  'END',
  'OPT-OUT',
  'OPTOUT',
  'QUIT',
  'REMOVE',
  'STOP',
  'STOPALL',
  'TD',
  'UNSUBSCRIBE',
]);
/** The opt-in keywords. */
export const OPT_IN_KEYWORDS: ReadonlySet<string> = new Set(['UNSTOP', 'START']);

/** An inbound text, read. */
export interface InboundSms {
  /** The customer's number (E.164). */
  readonly from: string;
  /** The origination number it was sent to: which client's identity. */
  readonly to: string;
  readonly messageId: string;
  /** What the text asks: to stop texts, to start them again, or nothing of the kind. */
  readonly intent: 'opt-out' | 'opt-in' | 'reply';
  /** The keyword that decided the intent, upper-cased. */
  readonly keyword?: string;
}

const E164 = /^\+[1-9][0-9]{1,18}$/;

/** The payload (raw from SQS, or inside an SNS envelope) read, or why it is of no use. */
export function readInboundSms(body: unknown): InboundSms | { readonly ignored: string } {
  const record = snsPayload(body);
  if (typeof record === 'string') return { ignored: record };
  const { originationNumber: from, destinationNumber: to, inboundMessageId: messageId } = record;
  if (typeof from !== 'string' || !E164.test(from))
    return { ignored: 'originationNumber is not an E.164 number' };
  if (typeof to !== 'string' || to === '' || to.length > 64) return { ignored: 'no destinationNumber' };
  if (typeof messageId !== 'string' || messageId === '' || messageId.length > 256)
    return { ignored: 'no inboundMessageId' };
  const keyword = keywordOf(record.messageKeyword, record.messageBody);
  const intent =
    keyword === undefined
      ? 'reply'
      : OPT_OUT_KEYWORDS.has(keyword)
        ? 'opt-out'
        : OPT_IN_KEYWORDS.has(keyword)
          ? 'opt-in'
          : 'reply';
  return { from, to, messageId, intent, ...(intent === 'reply' ? {} : { keyword }) };
}

/** The matched keyword the service named, else the text's first word; upper-cased. */
function keywordOf(messageKeyword: unknown, messageBody: unknown): string | undefined {
  const named = typeof messageKeyword === 'string' ? messageKeyword.trim().toUpperCase() : '';
  if (OPT_OUT_KEYWORDS.has(named) || OPT_IN_KEYWORDS.has(named)) return named;
  if (typeof messageBody !== 'string') return named || undefined;
  const first = messageBody
    .trim()
    .slice(0, 64)
    .split(/\s+/)[0]
    ?.replace(/[.!。！]+$/u, '')
    .toUpperCase();
  return first || named || undefined;
}
