/**
 * LINE's rules for message objects, as the sandbox checks them: each type's required properties
 * and limits from the Messaging API reference ("Message objects") and the official client's model
 * types (`@line/bot-sdk` `messaging-api/model/*Message.d.ts`). Written from LINE's documentation,
 * not from the project's own creation-time check, so that the two can disagree and a test see it.
 *
 * A problem is a {@link LineErrorDetail}: the `message` LINE gives and the `property` it names,
 * e.g. `{ message: 'must be specified', property: 'messages[0].stickerId' }`.
 */

export interface LineErrorDetail {
  readonly message: string;
  readonly property: string;
}

/** The message types LINE accepts (reference, "Message objects"). */
export const MESSAGE_TYPES = [
  'text',
  'textV2',
  'sticker',
  'image',
  'video',
  'audio',
  'location',
  'imagemap',
  'template',
  'flex',
  'coupon',
] as const;

/** Longest text of a text message, in characters. */
export const MAX_TEXT_LENGTH = 5000;
/** Longest URL LINE takes for content, previews and imagemap bases. */
export const MAX_URL_LENGTH = 2000;
/** Most quick reply buttons. */
export const MAX_QUICK_REPLY_ITEMS = 13;

const TEMPLATE_TYPES = ['buttons', 'confirm', 'carousel', 'image_carousel'];
const FLEX_CONTAINER_TYPES = ['bubble', 'carousel'];

type Fields = Readonly<Record<string, unknown>>;

/** One message's problems, each at its property under `messages[index]`. */
export function messageProblems(message: unknown, index: number): LineErrorDetail[] {
  const at = `messages[${index}]`;
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    return [{ message: 'Must be an object', property: at }];
  }
  const fields = message as Fields;
  const type = fields['type'];
  if (type === undefined) return [{ message: 'must be specified', property: `${at}.type` }];
  if (!(MESSAGE_TYPES as readonly unknown[]).includes(type)) {
    return [
      {
        message: `Must be one of the following values: [${MESSAGE_TYPES.join(', ')}]`,
        property: `${at}.type`,
      },
    ];
  }
  const check = new Problems(fields, at);
  TYPE_RULES[type as (typeof MESSAGE_TYPES)[number]](check);
  commonRules(check);
  return check.found;
}

/** Checks one message's fields, collecting a detail per problem. */
class Problems {
  readonly found: LineErrorDetail[] = [];
  readonly #fields: Fields;
  readonly #at: string;

  constructor(fields: Fields, at: string) {
    this.#fields = fields;
    this.#at = at;
  }

  value(name: string): unknown {
    return this.#fields[name];
  }

  add(name: string, message: string): void {
    this.found.push({ message, property: `${this.#at}.${name}` });
  }

  /** A required string of 1 to `max` characters. */
  text(name: string, max: number): void {
    this.#report(name, textProblem(this.#fields[name], max));
  }

  /** A required https URL of at most {@link MAX_URL_LENGTH} characters. */
  httpsUrl(name: string): void {
    const value = this.#fields[name];
    const problem = textProblem(value, MAX_URL_LENGTH);
    this.#report(name, problem ?? (isHttpsUrl(value as string) ? undefined : 'Must be a valid HTTPS URL'));
  }

  /** A required finite number. */
  number(name: string): void {
    const value = this.#fields[name];
    if (value === undefined || value === null) this.add(name, 'must be specified');
    else if (typeof value !== 'number' || !Number.isFinite(value)) this.add(name, 'Must be a number');
  }

  /** A required object whose `type` is one of `types`. */
  typedObject(name: string, types: readonly string[]): void {
    const value = this.#fields[name];
    if (value === undefined || value === null) this.add(name, 'must be specified');
    else if (typeof value !== 'object' || Array.isArray(value)) this.add(name, 'Must be an object');
    else if (!types.includes((value as Fields)['type'] as string))
      this.add(`${name}.type`, `Must be one of the following values: [${types.join(', ')}]`);
  }

  #report(name: string, problem: string | undefined): void {
    if (problem !== undefined) this.add(name, problem);
  }
}

/** What LINE says of a required string of 1 to `max` characters (UTF-16 code units), if wrong. */
function textProblem(value: unknown, max: number): string | undefined {
  if (value === undefined || value === null) return 'must be specified';
  if (typeof value !== 'string') return 'Must be a string';
  if (value.length === 0) return 'May not be empty';
  if (value.length > max) return `Length must be between 0 and ${max}`;
  return undefined;
}

const TYPE_RULES: Readonly<Record<(typeof MESSAGE_TYPES)[number], (check: Problems) => void>> = {
  text: (check) => check.text('text', MAX_TEXT_LENGTH),
  textV2: (check) => check.text('text', MAX_TEXT_LENGTH),
  sticker: (check) => {
    check.text('packageId', 100);
    check.text('stickerId', 100);
  },
  image: (check) => {
    check.httpsUrl('originalContentUrl');
    check.httpsUrl('previewImageUrl');
  },
  video: (check) => {
    check.httpsUrl('originalContentUrl');
    check.httpsUrl('previewImageUrl');
  },
  audio: (check) => {
    check.httpsUrl('originalContentUrl');
    check.number('duration');
  },
  location: (check) => {
    check.text('title', 100);
    check.text('address', 100);
    check.number('latitude');
    check.number('longitude');
  },
  imagemap: (check) => {
    check.httpsUrl('baseUrl');
    check.text('altText', 1500);
    const size = check.value('baseSize') as Fields | undefined;
    if (size === undefined || size === null) check.add('baseSize', 'must be specified');
    else {
      if (typeof size['width'] !== 'number') check.add('baseSize.width', 'must be specified');
      if (typeof size['height'] !== 'number') check.add('baseSize.height', 'must be specified');
    }
    const actions = check.value('actions');
    if (actions === undefined || actions === null) check.add('actions', 'must be specified');
    else if (!Array.isArray(actions)) check.add('actions', 'Must be an array');
    else if (actions.length > 50) check.add('actions', 'Size must be between 0 and 50');
  },
  template: (check) => {
    check.text('altText', 400);
    check.typedObject('template', TEMPLATE_TYPES);
  },
  flex: (check) => {
    check.text('altText', 1500);
    check.typedObject('contents', FLEX_CONTAINER_TYPES);
  },
  coupon: (check) => check.text('couponId', 100),
};

/** Properties every message may carry: a quick reply (at most 13 buttons) and a sender. */
function commonRules(check: Problems): void {
  const quickReply = check.value('quickReply') as Fields | undefined;
  if (quickReply !== undefined && quickReply !== null) {
    const items = quickReply['items'];
    if (!Array.isArray(items)) check.add('quickReply.items', 'must be specified');
    else if (items.length < 1 || items.length > MAX_QUICK_REPLY_ITEMS)
      check.add('quickReply.items', `Size must be between 1 and ${MAX_QUICK_REPLY_ITEMS}`);
  }
  const sender = check.value('sender') as Fields | undefined;
  if (sender !== undefined && sender !== null) {
    const name = sender['name'];
    if (typeof name === 'string' && (name.length === 0 || name.length > 20))
      check.add('sender.name', 'Length must be between 1 and 20');
    const iconUrl = sender['iconUrl'];
    if (iconUrl !== undefined && (typeof iconUrl !== 'string' || !isHttpsUrl(iconUrl)))
      check.add('sender.iconUrl', 'Must be a valid HTTPS URL');
  }
}

function isHttpsUrl(value: string): boolean {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}
