/**
 * Email addresses as customers' lists hold them, turned into the one form the rest of Switchboard
 * uses (`local@ascii-domain`), or refused with a reason an operator can act on.
 *
 * What is accepted is what Amazon SES will send to and what the Internet can deliver to, no more:
 * - Dot-atom local parts only (RFC 5322 §3.4.1 `atext` and dots): no leading, trailing or double
 *   dot. Quoted local parts (`"a b"@example.com`) are refused outright: SES's own handling of them
 *   is undocumented, and in a customer list they are almost always a cell pasted from a mail client.
 *   The local part keeps its letter case (RFC 5321 §2.4: the receiving host alone interprets it).
 * - ASCII local parts only: SES sends to 7-bit addresses and allows Punycode in the domain but
 *   "not permitted in the local part" (SES developer guide, troubleshooting "There are non-ASCII
 *   characters in the email address":
 *   https://docs.aws.amazon.com/ses/latest/dg/troubleshoot-error-messages.html; and
 *   https://docs.aws.amazon.com/ses/latest/dg/send-email-formatted.html).
 * - Domains are NFKC-normalised, lower-cased and, when internationalised, converted to Punycode
 *   with `node:url`'s `domainToASCII` (UTS #46, so `例え.テスト` → `xn--r8jz45g.xn--zckzah` and the
 *   ideographic full stop `。` is a dot). Every label must then be letters, digits and inner
 *   hyphens, at most 63 octets (RFC 1035 §2.3.4); at least two labels; the last not all digits.
 *   IP literals (`[192.0.2.1]`) and bare IPv4 addresses are refused: bulk mail to a host is never
 *   what a customer list means.
 * - Lengths are RFC 5321's: a local part of at most 64 octets (§4.5.3.1.1) and an address of at
 *   most 254 (the 256-octet path of §4.5.3.1.3 less its angle brackets; RFC 3696 erratum 1690,
 *   https://www.rfc-editor.org/errata/eid1690).
 *
 * Japanese spreadsheets: full-width forms (`ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ`, typed with the IME on)
 * are read as their ASCII letters everywhere, the local part included, and the ideographic space
 * is trimmed like any space. That is exactly what NFKC does to those characters, and what a
 * Japanese operator expects. The rest of NFKC is applied to the domain only: in a local part it
 * would also turn `①` into `1`, `ﬁ` into `fi` or a superscript into a digit — silently mailing a
 * different mailbox — so a local part with any other non-ASCII character is refused instead.
 *
 * A display-name form (`Taro <taro@example.com>`) is refused, naming the address inside: the cell
 * holds something else than an address, and taking the part in brackets would quietly accept
 * cells like `a@x.com <b@y.com>`.
 */
import { domainToASCII } from 'node:url';

/** RFC 5321 §4.5.3.1.1. */
export const MAX_LOCAL_PART_OCTETS = 64;
/** RFC 5321 §4.5.3.1.3 less the path's `<` and `>` (RFC 3696 erratum 1690). */
export const MAX_ADDRESS_OCTETS = 254;
/** RFC 1035 §2.3.4. */
export const MAX_LABEL_OCTETS = 63;
/** Longer input is refused before any other work: no address is anywhere near this long. */
const MAX_INPUT_CHARS = 1_000;

export type EmailAddressCheck =
  | { readonly ok: true; readonly address: string }
  | { readonly ok: false; readonly reason: string };

/** RFC 5322 §3.2.3 `atext`. */
const ATEXT = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]$/;
const LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
const FULL_WIDTH = /[\uFF01-\uFF5E\u3000]/g;

/**
 * The address in the form Switchboard stores and sends to, or why it is not one. Never throws:
 * any string (or anything else) gets an answer.
 */
export function normalizeEmailAddress(raw: string): EmailAddressCheck {
  if (typeof raw !== 'string') return refuse('is not text');
  if (raw.length > MAX_INPUT_CHARS) {
    return refuse(`is ${raw.length} characters long; an address has at most ${MAX_ADDRESS_OCTETS}`);
  }
  const text = foldFullWidth(raw).trim();
  if (text === '') return { ok: false, reason: 'email address is empty' };
  const shape = checkShape(text);
  if (shape) return refuse(shape);
  const at = text.indexOf('@');
  const local = text.slice(0, at);
  const localProblem = checkLocalPart(local);
  if (localProblem) return refuse(localProblem);
  const domain = toAsciiDomain(text.slice(at + 1));
  if (!domain.ok) return refuse(domain.reason);
  const address = `${local}@${domain.domain}`;
  if (address.length > MAX_ADDRESS_OCTETS) {
    return refuse(`is ${address.length} characters long; an address has at most ${MAX_ADDRESS_OCTETS}`);
  }
  return { ok: true, address };
}

/**
 * The form an address is matched by on a suppression list: the whole normalised address in lower
 * case, so `Taro@example.com` and `taro@example.com` are one entry.
 *
 * Local parts are compared case-insensitively on purpose. RFC 5321 §2.4 lets a host treat
 * `Taro` and `taro` as two mailboxes but says exploiting that "is discouraged", and no large
 * mailbox provider does; erring this way only ever holds back mail, never sends it to someone who
 * asked to stop. Amazon SES does not document how its account-level suppression list compares
 * case (the API reference and developer guide are silent; third-party emulators disagree on what
 * they observed: https://github.com/floci-io/floci/pull/1350 reports a case-sensitive local part,
 * https://github.com/KensioSoftware/yulin/pull/886 a case-insensitive send-time match), so
 * Switchboard keeps its own list and never relies on SES's for correctness.
 *
 * `address` must come from {@link normalizeEmailAddress} (ASCII only, so lower-casing is
 * locale-free).
 */
export function emailSuppressionKey(address: string): string {
  return address.toLowerCase();
}

function refuse(detail: string): EmailAddressCheck {
  return { ok: false, reason: `invalid email address: ${detail}` };
}

/** Full-width ASCII variants (U+FF01–U+FF5E) as ASCII, the ideographic space as a space. */
function foldFullWidth(text: string): string {
  return text.replace(FULL_WIDTH, (c) =>
    c === '\u3000' ? ' ' : String.fromCharCode(c.charCodeAt(0) - 0xfee0),
  );
}

/** What is wrong with the whole cell's shape (exactly one `@`, no name, no quotes), if anything. */
function checkShape(text: string): string | undefined {
  const bracketed = /<([^<>]*)>/.exec(text);
  if (bracketed || /[<>]/.test(text)) {
    const inside = bracketed?.[1]?.trim();
    return inside
      ? `looks like a name with an address ("${text}"); keep only the address, ${inside}`
      : `contains "<" or ">", which an address cannot contain`;
  }
  if (/^mailto:/i.test(text)) return 'starts with "mailto:"; keep only the address after it';
  if (text.includes('"')) return 'has a quoted part ("…"); quoted local parts are not accepted';
  const ats = text.split('@').length - 1;
  if (ats === 0) return 'has no @';
  if (ats > 1) {
    return /[\s,;]/.test(text)
      ? 'holds more than one address; put one address in each row'
      : 'has more than one @';
  }
  if (/\s/.test(text)) return 'contains a space';
  return undefined;
}

function checkLocalPart(local: string): string | undefined {
  if (local === '') return 'has nothing before the @';
  for (const char of local) {
    if (char === '.') continue;
    if (char.codePointAt(0)! > 0x7f) {
      return `the part before the @ has ${describe(char)}, which is not ASCII; Amazon SES sends only to ASCII local parts`;
    }
    if (!ATEXT.test(char))
      return `the part before the @ has ${describe(char)}, which an address cannot contain`;
  }
  if (local.startsWith('.') || local.endsWith('.')) return 'the part before the @ starts or ends with a dot';
  if (local.includes('..')) return 'the part before the @ has two dots in a row';
  if (local.length > MAX_LOCAL_PART_OCTETS) {
    return `the part before the @ is ${local.length} characters long; at most ${MAX_LOCAL_PART_OCTETS}`;
  }
  return undefined;
}

type DomainCheck =
  | { readonly ok: true; readonly domain: string }
  | { readonly ok: false; readonly reason: string };

/**
 * The domain in lower-case ASCII (Punycode for internationalised labels), checked label by label.
 * An all-ASCII domain never goes through `domainToASCII`: being a WHATWG URL host parser it would
 * also decode `%41` and rewrite `0x7f.1` as `127.0.0.1`, neither of which is a mail domain.
 */
function toAsciiDomain(input: string): DomainCheck {
  if (input === '') return { ok: false, reason: 'has nothing after the @' };
  if (input.startsWith('[')) return { ok: false, reason: 'the domain is an IP address; use a domain name' };
  const text = input.normalize('NFKC').toLowerCase();
  for (const char of text) {
    if (char.codePointAt(0)! <= 0x7e && !/[a-z0-9.-]/.test(char)) {
      return { ok: false, reason: `the domain has ${describe(char)}, which a domain name cannot contain` };
    }
  }
  const ascii = /^[\x00-\x7e]*$/.test(text) ? text : domainToASCII(text);
  if (ascii === '') return { ok: false, reason: `the domain "${input}" is not a valid domain name` };
  const labels = ascii.split('.');
  if (labels.length < 2) return { ok: false, reason: `the domain "${input}" has no dot` };
  if (labels.includes('')) {
    return {
      ok: false,
      reason: 'the domain has an empty part (two dots in a row, or a dot at its start or end)',
    };
  }
  for (const label of labels) {
    if (label.length > MAX_LABEL_OCTETS) {
      return {
        ok: false,
        reason: `a part of the domain is ${label.length} characters long; at most ${MAX_LABEL_OCTETS}`,
      };
    }
    if (label.startsWith('-') || label.endsWith('-')) {
      return { ok: false, reason: `the domain part "${label}" starts or ends with a hyphen` };
    }
    if (!LABEL.test(label)) return { ok: false, reason: `the domain part "${label}" is not a valid label` };
  }
  if (/^\d+$/.test(labels.at(-1)!))
    return { ok: false, reason: 'the domain is an IP address; use a domain name' };
  return { ok: true, domain: ascii };
}

/** A character as an operator can find it: quoted, with its code point when it is invisible or unusual. */
function describe(char: string): string {
  const code = `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  return /^[\x21-\x7e]$/.test(char) ? `"${char}"` : `${JSON.stringify(char)} (${code})`;
}
