/**
 * LINE's rules for message objects, checked when a message job is created so that a campaign LINE
 * would answer 400 for every recipient is refused before it starts, with each problem at its
 * property (`messages[0].packageId`), as LINE's own validation endpoints name them
 * (`POST /v2/bot/message/validate/push`, `…/multicast`).
 *
 * Source: the Messaging API reference, "Message objects"
 * (https://developers.line.biz/en/reference/messaging-api/#message-objects): the required
 * properties of each type, text up to 5,000 characters, URLs https and up to 2,000 characters,
 * a location's title and address up to 100, alternative text up to 400 (template) or 1,500
 * (imagemap, flex), an audio's duration in milliseconds. A string holding a `{{variable}}` is
 * checked for what it has whatever fills it (its text without placeholders within the length);
 * its full length and form are known once it is filled, at the send.
 */
import { z } from 'zod';

/** LINE's longest text message, in characters. */
export const MAX_TEXT_LENGTH = 5000;
const MAX_URL_LENGTH = 2000;

const HAS_PLACEHOLDER = /\{\{\s*[^{}\s]+\s*\}\}/;
const PLACEHOLDERS = /\{\{\s*[^{}\s]+\s*\}\}/g;

/** The characters a string has whatever fills it: its text without its placeholders. */
const literalLength = (s: string) => s.replace(PLACEHOLDERS, '').length;

/** A string LINE requires, of at most `max` characters when it holds no placeholder. */
const text = (max: number) =>
  z
    .string(`must be 1 to ${max} characters`)
    .refine((s) => s.length > 0 && literalLength(s) <= max, `must be 1 to ${max} characters`);

/** An https URL of at most 2,000 characters (LINE fetches it), unless a placeholder fills it. */
const httpsUrl = z
  .string('must be an https URL')
  .min(1, 'must not be empty')
  .refine(
    (s) => literalLength(s) <= MAX_URL_LENGTH && (HAS_PLACEHOLDER.test(s) || /^https:\/\/[^\s]+$/.test(s)),
    `must be an https URL of at most ${MAX_URL_LENGTH} characters`,
  );

const id = z.string('must be a string').min(1, 'must not be empty');
const object = (what: string) => z.looseObject({}, `must be ${what}`);

/** Each type's required properties (others LINE accepts, such as `quickReply` or `sender`, pass). */
const BY_TYPE = {
  text: z.looseObject({ text: text(MAX_TEXT_LENGTH) }),
  textV2: z.looseObject({ text: text(MAX_TEXT_LENGTH) }),
  sticker: z.looseObject({ packageId: id, stickerId: id }),
  image: z.looseObject({ originalContentUrl: httpsUrl, previewImageUrl: httpsUrl }),
  video: z.looseObject({ originalContentUrl: httpsUrl, previewImageUrl: httpsUrl }),
  audio: z.looseObject({
    originalContentUrl: httpsUrl,
    duration: z.number('must be a number of milliseconds').int('must be whole milliseconds').positive(),
  }),
  location: z.looseObject({
    title: text(100),
    address: text(100),
    latitude: z.number('must be a number').min(-90).max(90),
    longitude: z.number('must be a number').min(-180).max(180),
  }),
  imagemap: z.looseObject({
    baseUrl: httpsUrl,
    altText: text(1500),
    baseSize: object('{ width, height }'),
    actions: z.array(z.unknown(), 'must be a list of actions').min(1).max(50),
  }),
  template: z.looseObject({ altText: text(400), template: object('a template object') }),
  flex: z.looseObject({ altText: text(1500), contents: object('a bubble or a carousel') }),
  coupon: z.looseObject({ couponId: id }),
} as const;

/** LINE's message types. */
export const LINE_MESSAGE_TYPES = Object.keys(BY_TYPE) as (keyof typeof BY_TYPE)[];

/** One problem, as LINE's `details[]` has it: the property's path and what is wrong with it. */
export interface MessageObjectProblem {
  readonly property: string;
  /** The same place as a path into the messages list (`[0, 'packageId']`). */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** What LINE would refuse in `messages` (each checked by its type); empty when nothing. */
export function messageObjectProblems(messages: readonly unknown[]): MessageObjectProblem[] {
  const problems: MessageObjectProblem[] = [];
  messages.forEach((message, index) => {
    const at = `messages[${index}]`;
    const type = (message as { type?: unknown } | null)?.type;
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      problems.push({ property: at, path: [index], message: 'must be a message object' });
      return;
    }
    if (typeof type !== 'string' || !Object.hasOwn(BY_TYPE, type)) {
      problems.push({
        property: `${at}.type`,
        path: [index, 'type'],
        message: `must be one of the following values: [${LINE_MESSAGE_TYPES.join(', ')}]`,
      });
      return;
    }
    const parsed = BY_TYPE[type as keyof typeof BY_TYPE].safeParse(message);
    if (parsed.success) return;
    for (const issue of parsed.error.issues) {
      const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
      problems.push({
        property: `${at}${path}`,
        path: [index, ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))],
        message: issue.message,
      });
    }
  });
  return problems;
}
