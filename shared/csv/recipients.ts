/**
 * A recipient cell as the customer typed it, turned into the one form the rest of the system
 * uses: E.164 for phone numbers (`090-1234-5678` → `+819012345678`), the LINE user id as is.
 *
 * Decisions, in the customer's interest of never calling a wrong number:
 * - Full-width digits and signs are read as their ASCII forms; spaces, dashes of every kind
 *   (incl. the long-vowel mark ー typed for a dash), dots and parentheses are separators.
 * - A number without its leading 0 (`9012345678`, what Excel makes of a mobile number typed
 *   in a General cell) is read as a national number of the default region, as libphonenumber
 *   does: for JP that is exactly the number the customer meant.
 * - A float rendering of an integer (`9012345678.0`, from pandas and some databases) is read
 *   as that integer.
 * - A cell written `="09012345678"` (Excel's formula that keeps a leading zero, exported as is) or
 *   `'09012345678` (a text-prefix apostrophe) is read as the number inside.
 * - Scientific notation (`9.01235E+10`, Excel's display of long numbers) is rejected: its digits
 *   are gone, and guessing them would call a stranger.
 * - Validation uses libphonenumber's full metadata (number patterns, not just lengths).
 */
import { type CountryCode, isSupportedCountry, parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { emailSuppressionKey, normalizeEmailAddress } from '#shared/email/address.ts';

export type { CountryCode };

export type RecipientRejection =
  | 'phone-empty'
  | 'invalid-phone'
  | 'phone-scientific-notation'
  | 'line-user-id-empty'
  | 'invalid-line-user-id'
  | 'email-empty'
  | 'invalid-email';

export type RecipientCheck =
  | { readonly ok: true; readonly recipient: string }
  | { readonly ok: false; readonly code: RecipientRejection; readonly reason: string };

const SEPARATORS_RE = /[\s\-‐‑‒–—―−ー.()]/g;
const SCIENTIFIC_RE = /^[+-]?\d+(\.\d+)?e[+-]?\d+$/i;
const FLOAT_OF_INTEGER_RE = /^(\d+)\.0+$/;
/** `="09012345678"`: Excel's way to keep a leading zero, exported as the formula's text. */
const EXCEL_TEXT_FORMULA_RE = /^="(.*)"$/;
/** ` "090…"`: quotes a space outside left in the cell (no number has quotes). */
const QUOTED_RE = /^"(.*)"$/;

/** True for a region code libphonenumber knows (`JP`, `US`, ...). */
export function isKnownRegion(region: string): region is CountryCode {
  return isSupportedCountry(region);
}

/** Normalises a phone cell to E.164, reading national numbers as numbers of `defaultRegion`. */
export function normalizePhoneNumber(cell: string, defaultRegion: CountryCode): RecipientCheck {
  const text = cell
    .normalize('NFKC')
    .trim()
    .replace(/^'/, '')
    .replace(EXCEL_TEXT_FORMULA_RE, '$1')
    .replace(QUOTED_RE, '$1')
    .trim();
  if (text === '') return { ok: false, code: 'phone-empty', reason: 'phone is empty' };
  if (SCIENTIFIC_RE.test(text)) {
    return {
      ok: false,
      code: 'phone-scientific-notation',
      reason:
        'invalid phone number: Excel saved it in scientific notation and its digits are lost; format the column as text',
    };
  }
  const digits = (FLOAT_OF_INTEGER_RE.exec(text)?.[1] ?? text).replace(SEPARATORS_RE, '');
  if (!/^\+?\d{1,20}$/.test(digits)) return invalidPhone();
  const phone = parsePhoneNumberFromString(digits, { defaultCountry: defaultRegion, extract: false });
  if (!phone?.isValid()) return invalidPhone();
  return { ok: true, recipient: phone.number };
}

function invalidPhone(): RecipientCheck {
  return { ok: false, code: 'invalid-phone', reason: 'invalid phone number' };
}

const LINE_USER_ID_RE = /^U[0-9a-f]{32}$/;

/** Checks a LINE user id cell: `U` followed by 32 lower-case hex digits. */
/**
 * An email list's cell as the address sent to (`shared/email/address.ts`), or why it is not one.
 * The whole address is lower-cased (`emailSuppressionKey`): the same person written `Taro@…` and
 * `taro@…` is one recipient, one duplicate, one suppression entry — as mail providers treat them.
 */
export function normalizeEmailRecipient(cell: string): RecipientCheck {
  if (cell.trim() === '') return { ok: false, code: 'email-empty', reason: 'email address is empty' };
  const checked = normalizeEmailAddress(cell);
  return checked.ok
    ? { ok: true, recipient: emailSuppressionKey(checked.address) }
    : { ok: false, code: 'invalid-email', reason: checked.reason };
}

export function normalizeLineUserId(cell: string): RecipientCheck {
  const text = cell.trim();
  if (text === '') return { ok: false, code: 'line-user-id-empty', reason: 'LINE user id is empty' };
  if (!LINE_USER_ID_RE.test(text)) {
    return {
      ok: false,
      code: 'invalid-line-user-id',
      reason: 'invalid LINE user id (expected U and 32 hex digits)',
    };
  }
  return { ok: true, recipient: text };
}
