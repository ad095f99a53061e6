/**
 * The stand-in's outbox: every email it accepts for sending, written to a directory as a message a
 * mail program opens (`{MessageId}.eml`, RFC 5322 with MIME), so a developer can read what a
 * campaign sent. SES keeps no such copy; this is the local cloud's window on what would have gone
 * out, beside the protocol, which it leaves unchanged.
 *
 * A `Simple` or templated email is assembled as SES assembles it (From, Reply-To, To, Cc, Subject,
 * Date, Message-ID, MIME-Version, the caller's headers such as `List-Unsubscribe`, then a text and
 * / or HTML part, `multipart/alternative` for both). Bodies are UTF-8 with
 * `Content-Transfer-Encoding: 8bit`, so the file reads as text; a non-ASCII subject is an RFC 2047
 * encoded word. Attachments are not kept. A `Raw` email is written as the bytes it was sent as. An
 * email whose template could not be rendered is not written: SES accepts it, then sends nothing.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { SentEmail } from './compose.ts';

const BOUNDARY = '----=_Part_0_0.0';

export class SesOutbox {
  /** Where the `.eml` files go. */
  readonly directory: string;
  #written = 0;

  /** Creates `directory` if it is not there. */
  constructor(directory: string) {
    this.directory = directory;
    mkdirSync(directory, { recursive: true });
  }

  /** Emails written so far. */
  get written(): number {
    return this.#written;
  }

  /**
   * Writes `email` as `{messageId}.eml` (synchronously: the file is there when SES answers);
   * resolves with its path, or undefined for an email that is not sent.
   */
  write(email: SentEmail): string | undefined {
    const message = emlOf(email);
    if (message === undefined) return undefined;
    const file = path.join(this.directory, `${email.messageId}.eml`);
    writeFileSync(file, message);
    this.#written++;
    return file;
  }
}

/** The email as the message SES would send, or undefined when none is sent (a rendering failure). */
export function emlOf(email: SentEmail): Buffer | undefined {
  if (email.renderingFailure !== undefined) return undefined;
  if (email.message !== undefined) return Buffer.from(email.message);
  const own: [string, string | undefined][] = [
    ['From', email.from],
    ['Reply-To', list(email.replyTo)],
    ['To', list(email.to)],
    ['Cc', list(email.cc)],
    ['Subject', email.subject === undefined ? undefined : encodedWord(email.subject)],
    ['Date', new Date(email.at).toUTCString().replace('GMT', '+0000')],
    ['Message-ID', `<${email.messageId}@email.amazonses.com>`],
    ['MIME-Version', '1.0'],
  ];
  const headers = [
    ...own.filter((h): h is [string, string] => h[1] !== undefined),
    ...email.headers.map((h): [string, string] => [h.name, h.value]),
  ];
  const head = headers.map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return Buffer.from(`${head}${body(email)}`, 'utf8');
}

/** The Content-Type header and what follows it: one part, or both in `multipart/alternative`. */
function body(email: SentEmail): string {
  const part = (type: 'plain' | 'html', content: string) =>
    `Content-Type: text/${type}; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n${crlf(content)}\r\n`;
  const text = email.text === undefined ? undefined : part('plain', email.text);
  const html = email.html === undefined ? undefined : part('html', email.html);
  if (text !== undefined && html !== undefined) {
    return (
      `Content-Type: multipart/alternative; boundary="${BOUNDARY}"\r\n\r\n` +
      `--${BOUNDARY}\r\n${text}--${BOUNDARY}\r\n${html}--${BOUNDARY}--\r\n`
    );
  }
  return text ?? html ?? part('plain', '');
}

function list(addresses: readonly string[]): string | undefined {
  return addresses.length > 0 ? addresses.join(', ') : undefined;
}

/**
 * RFC 2047: a header value that is not printable ASCII, as `=?UTF-8?B?…?=` words of at most 75
 * characters (whole characters in each), folded onto lines of their own.
 */
function encodedWord(value: string): string {
  if (/^[\x20-\x7e]*$/.test(value)) return value;
  const words: string[] = [];
  let chunk = '';
  for (const char of value) {
    // 45 bytes are 60 base64 characters: with `=?UTF-8?B?` and `?=`, 72.
    if (Buffer.byteLength(chunk + char, 'utf8') > 45) {
      words.push(chunk);
      chunk = '';
    }
    chunk += char;
  }
  words.push(chunk);
  return words.map((w) => `=?UTF-8?B?${Buffer.from(w, 'utf8').toString('base64')}?=`).join('\r\n ');
}

/** Line ends as a message has them. */
function crlf(text: string): string {
  return text.replace(/\r?\n/g, '\r\n');
}
