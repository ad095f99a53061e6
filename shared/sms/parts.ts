/**
 * How many message parts an SMS text costs, which is what End User Messaging SMS bills and paces by
 * (throughput is in message parts per second, MPS).
 *
 * AWS End User Messaging SMS User Guide, "SMS character limits"
 * (https://docs.aws.amazon.com/sms-voice/latest/userguide/sms-limitations-character.html): a part
 * holds 140 bytes; a text made only of GSM 03.38 characters (the GSM 7-bit alphabet) fits 160 of
 * them in one part, any other text 70; a longer text is split, and each part then carries a header,
 * leaving 153 GSM or 67 other characters a part. The service picks the encoding itself. See also
 * "What are the Message Parts per Second (MPS) limits"
 * (https://docs.aws.amazon.com/sms-voice/latest/userguide/sms-limitations-mps.html).
 *
 * What the guide leaves to GSM 03.38 (3GPP TS 23.038) and UCS-2 themselves:
 * - the extension table's characters (form feed, `^ { } \ [ ~ ] | €`) are an escape and a
 *   character, 2 septets each;
 * - UCS-2 counts 16-bit units: a character outside the Basic Multilingual Plane (most emoji) is a
 *   UTF-16 surrogate pair, 2 units;
 * - neither an escaped GSM character nor a surrogate pair is cut between two parts, so a split text
 *   can need one part more than its length divided by 153 (or 67).
 */

/** The GSM 03.38 basic character set: 1 septet each. */
const GSM_BASIC = new Set(
  [
    '@£$¥èéùìòÇ\nØø\rÅå',
    'Δ_ΦΓΛΩΠΨΣΘΞÆæßÉ',
    ' !"#¤%&\'()*+,-./',
    '0123456789:;<=>?',
    '¡ABCDEFGHIJKLMNO',
    'PQRSTUVWXYZÄÖÑÜ§',
    '¿abcdefghijklmno',
    'pqrstuvwxyzäöñüà',
  ].join(''),
);

/** The GSM 03.38 extension table: an escape and a character, 2 septets each. */
const GSM_EXTENSION = new Set('\f^{}\\[~]|€');

export type SmsEncoding = 'GSM' | 'UCS2';

/** What a text costs as SMS. */
export interface MessageParts {
  /** GSM 7-bit when every character is in GSM 03.38, else UCS-2. */
  readonly encoding: SmsEncoding;
  /** Parts billed and paced: 0 for an empty text. */
  readonly parts: number;
  /**
   * The text's length as the limits count it: septets for GSM (an extension character is 2), UTF-16
   * code units for UCS-2 (a surrogate pair is 2).
   */
  readonly characters: number;
}

const LIMITS = {
  GSM: { single: 160, split: 153 },
  UCS2: { single: 70, split: 67 },
} as const satisfies Record<SmsEncoding, { single: number; split: number }>;

/**
 * The encoding, parts and length of `text` as End User Messaging SMS sends it.
 *
 * @example
 * messageParts('Your code is 1234'); // { encoding: 'GSM', parts: 1, characters: 17 }
 * messageParts('ご予約の確認です'); // { encoding: 'UCS2', parts: 1, characters: 8 }
 */
export function messageParts(text: string): MessageParts {
  const costs = gsmCosts(text);
  const encoding: SmsEncoding = costs ? 'GSM' : 'UCS2';
  // A UCS-2 character costs its UTF-16 units: iterating by code point keeps a surrogate pair whole.
  const units = costs ?? Array.from(text, (char) => char.length);
  const characters = units.reduce((sum, cost) => sum + cost, 0);
  const limits = LIMITS[encoding];
  if (characters === 0) return { encoding, parts: 0, characters };
  if (characters <= limits.single) return { encoding, parts: 1, characters };
  return { encoding, parts: splitParts(units, limits.split), characters };
}

/** Each character's septets, or undefined when a character is not in GSM 03.38. */
function gsmCosts(text: string): number[] | undefined {
  const costs: number[] = [];
  for (const char of text) {
    if (GSM_BASIC.has(char)) costs.push(1);
    else if (GSM_EXTENSION.has(char)) costs.push(2);
    else return undefined;
  }
  return costs;
}

/** Parts of `capacity` units, filled in order, never cutting a character's units apart. */
function splitParts(costs: readonly number[], capacity: number): number {
  let parts = 1;
  let used = 0;
  for (const cost of costs) {
    if (used + cost > capacity) {
      parts += 1;
      used = 0;
    }
    used += cost;
  }
  return parts;
}
