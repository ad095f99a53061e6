/**
 * Which column of a customer's header row holds what. Headers are matched in English and
 * Japanese, ignoring case, spaces, `_ - . ・ :` and full-/half-width differences
 * (`ＰＨＯＮＥ　ＮＵＭＢＥＲ` = `phone_number`). Every column that is not the recipient or the
 * name is kept as a per-row variable for the scenario or message template, keyed by its header
 * text as written.
 */

import type { JobChannel } from '#shared/jobs/model.ts';
import type { IdentifierKind } from '#shared/people/model.ts';

/** How a job reaches its recipients: an outbound call, a LINE push, an email, a text (SMS). */
export type Channel = JobChannel;

const PHONE_HEADERS = [
  'phone',
  'phonenumber',
  'phoneno',
  'tel',
  'telno',
  'telephone',
  'telephonenumber',
  'mobile',
  'mobilephone',
  'mobilenumber',
  'cell',
  'cellphone',
  '電話番号',
  '電話',
  'tel番号',
  '携帯電話番号',
  '携帯電話',
  '携帯番号',
  '携帯',
];

const LINE_USER_ID_HEADERS = ['userid', 'lineuserid', 'lineユーザーid', 'ユーザーid'];

/** An email list's address column, in the words Japanese and English spreadsheets use. */
const EMAIL_HEADERS = [
  'email',
  'emailaddress',
  'mail',
  'mailaddress',
  'eメール',
  'eメールアドレス',
  'メール',
  'メールアドレス',
  'メアド',
  '電子メール',
  '電子メールアドレス',
];

/** A mobile number's headers (a text goes to a mobile, not to a landline beside it). */
const MOBILE_HEADERS = [
  'mobile',
  'mobilephone',
  'mobilenumber',
  'cell',
  'cellphone',
  '携帯電話番号',
  '携帯電話',
  '携帯番号',
  '携帯',
];

/**
 * The headers a channel's recipient column may have, in tiers: the leftmost column of the first
 * tier that has one. An SMS list with 電話番号 and 携帯電話番号 is texted at the mobile column.
 */
const RECIPIENT_HEADERS: Readonly<Record<Channel, readonly (readonly string[])[]>> = {
  call: [PHONE_HEADERS],
  line: [LINE_USER_ID_HEADERS],
  email: [EMAIL_HEADERS],
  sms: [MOBILE_HEADERS, PHONE_HEADERS],
};

const NAME_HEADERS = [
  'name',
  'fullname',
  'customername',
  '氏名',
  '名前',
  'お名前',
  '顧客名',
  'お客様名',
  '宛名',
];

/**
 * Whether a placeholder or header names the list's name column (`名前`, `お名前`, `氏名`, `Name` …,
 * compared as headers are): a template may write the name as its header shows it.
 */
export function isNameHeader(header: string): boolean {
  return NAME_HEADERS.includes(normalizeHeader(header));
}

/** A call list's per-row time zone (issue 14 #4), e.g. `America/New_York`. */
const TIME_ZONE_HEADERS = ['timezone', 'timezoneid', 'tz', 'タイムゾーン', 'タイムゾーンid'];

/** The comparable form of a header: NFKC (full-width → half-width), lower case, no separators. */
export function normalizeHeader(header: string): string {
  return header
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\s_\-.・:]/g, '');
}

export interface HeaderMap {
  /** The header cells as written (trimmed), without the empty ones at the end of the row. */
  readonly headers: readonly string[];
  /** Column index of the recipient (phone number for calls, LINE user id for messages). */
  readonly recipient: number;
  readonly name: number | undefined;
  /** Column index of the recipient's time zone (call lists only), when the list has one. */
  readonly timeZone?: number;
  /** The other columns, each with the (unique) key its values are stored under. */
  readonly variables: readonly { readonly index: number; readonly key: string }[];
  /**
   * The columns besides the recipient's that hold another identifier of the row's person (a phone
   * number, a LINE user id, an email address): the row links them (`shared/people/model.ts`). They
   * stay variables too.
   */
  readonly identifiers: readonly { readonly index: number; readonly kind: IdentifierKind }[];
}

export type HeaderMapping =
  | { readonly ok: true; readonly map: HeaderMap }
  | { readonly ok: false; readonly reason: string };

/**
 * Finds the recipient and name columns of a header row for a job on `channel`. When several
 * columns could be the recipient, the leftmost wins and the others stay variables; an explicit
 * `recipientColumn` (header text, compared like the aliases) overrides the aliases.
 *
 * Empty cells at the end of the header row are not columns: Excel writes them (`phone,name,,`)
 * when its used range is wider than the header, and its data rows then end early or late.
 */
export function mapHeader(
  headerCells: readonly string[],
  channel: Channel,
  options: { readonly recipientColumn?: string } = {},
): HeaderMapping {
  const headers = headerCells.map((cell) => cell.trim());
  while (headers.length > 0 && headers.at(-1) === '') headers.pop();
  const normalized = headers.map(normalizeHeader);
  const tiers = options.recipientColumn
    ? [[normalizeHeader(options.recipientColumn)]]
    : RECIPIENT_HEADERS[channel];
  let recipient = -1;
  for (const wanted of tiers) {
    recipient = normalized.findIndex((header) => wanted.includes(header));
    if (recipient >= 0) break;
  }
  if (recipient < 0)
    return { ok: false, reason: missingRecipientReason(headers, channel, options.recipientColumn) };
  const nameIndex = normalized.findIndex((header, i) => i !== recipient && NAME_HEADERS.includes(header));
  const name = nameIndex < 0 ? undefined : nameIndex;
  const zoneIndex =
    channel === 'call'
      ? normalized.findIndex(
          (header, i) => i !== recipient && i !== name && TIME_ZONE_HEADERS.includes(header),
        )
      : -1;
  const timeZone = zoneIndex < 0 ? undefined : zoneIndex;

  const used = new Set<string>();
  const variables: { index: number; key: string }[] = [];
  headers.forEach((header, index) => {
    if (index === recipient || index === name || index === timeZone) return;
    const base = header === '' ? columnLetter(index) : header;
    let key = base;
    for (let n = 2; used.has(key); n++) key = `${base} (${n})`;
    used.add(key);
    variables.push({ index, key });
  });
  const identifiers = identifierColumns(normalized, recipient);
  return {
    ok: true,
    map: {
      headers,
      recipient,
      name,
      ...(timeZone === undefined ? {} : { timeZone }),
      variables,
      identifiers,
    },
  };
}

/** Each identifier header's kind, as the person's other identifiers are found in a row. */
const IDENTIFIER_HEADERS: readonly { readonly kind: IdentifierKind; readonly headers: readonly string[] }[] =
  [
    { kind: 'phone', headers: PHONE_HEADERS },
    { kind: 'line', headers: LINE_USER_ID_HEADERS },
    { kind: 'email', headers: EMAIL_HEADERS },
  ];

/**
 * The columns other than the recipient's whose header names an identifier of the person; a mobile
 * number's columns before other phone columns (a fallback to SMS texts the first phone it finds).
 */
function identifierColumns(normalized: readonly string[], recipient: number): HeaderMap['identifiers'] {
  const out: { index: number; kind: IdentifierKind }[] = [];
  normalized.forEach((header, index) => {
    if (index === recipient) return;
    const found = IDENTIFIER_HEADERS.find((entry) => entry.headers.includes(header));
    if (found) out.push({ index, kind: found.kind });
  });
  const mobile = (c: { index: number }) => (MOBILE_HEADERS.includes(normalized[c.index]!) ? 0 : 1);
  return out.sort((a, b) => mobile(a) - mobile(b));
}

function missingRecipientReason(
  headers: readonly string[],
  channel: Channel,
  explicit: string | undefined,
): string {
  const found = headers.filter((header) => header !== '');
  const listed = found.length === 0 ? 'the header row is empty' : `the header row has ${found.join(', ')}`;
  if (explicit) return `no column named "${explicit}": ${listed}`;
  const what = {
    call: 'no phone number column (name it 電話番号, 携帯電話番号, TEL or phone)',
    line: 'no LINE user id column (name it userId or line_user_id)',
    email: 'no email address column (name it メールアドレス, Eメール, email or e-mail)',
    sms: 'no mobile number column (name it 携帯電話番号, 電話番号, mobile or phone)',
  }[channel];
  return `${what}: ${listed}`;
}

/** The spreadsheet letter of a 0-based column index: 0 → A, 26 → AA. */
export function columnLetter(index: number): string {
  let letters = '';
  for (let n = index + 1; n > 0; n = Math.floor((n - 1) / 26)) {
    letters = String.fromCharCode(65 + ((n - 1) % 26)) + letters;
  }
  return letters;
}
