/**
 * The SES stand-in's outbox: each email it accepts, written as the message a mail program opens.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SentEmail } from '#local/ses/compose.ts';
import { emlOf, SesOutbox } from '#local/ses/outbox.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ses-outbox-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const EMAIL: SentEmail = {
  from: '=?UTF-8?B?44K344On44OD44OX?= <news@example.com>',
  fromAddress: 'news@example.com',
  to: ['success+1@simulator.amazonses.com'],
  cc: [],
  bcc: ['audit@example.com'],
  replyTo: ['support@example.com'],
  subject: '佐藤 陽翔 様、12月のクーポンをお届けします。お見逃しなく、今月末までです',
  text: '佐藤 陽翔 様\nクーポン XMAS-1',
  html: '<p>佐藤 陽翔 様</p>',
  headers: [
    { name: 'List-Unsubscribe', value: '<https://api.example.com/unsubscribe/t0k3n>' },
    { name: 'List-Unsubscribe-Post', value: 'List-Unsubscribe=One-Click' },
  ],
  tags: { 'sb-job': 'J1' },
  size: 100,
  messageId: '0100018f00000000-4a1f-000000',
  at: Date.UTC(2026, 11, 24, 9, 30),
  operation: 'SendBulkEmail',
};

/** The header section, unfolded, by name. */
function headersOf(eml: string): Map<string, string> {
  const head = eml.slice(0, eml.indexOf('\r\n\r\n')).replace(/\r\n /g, ' ');
  return new Map(
    head.split('\r\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
  );
}

const decodeWords = (value: string) =>
  value
    .split(' ')
    .map((word) => Buffer.from(/^=\?UTF-8\?B\?([^?]*)\?=$/.exec(word)![1]!, 'base64').toString('utf8'))
    .join('');

describe('the SES stand-in outbox', () => {
  it('writes an email as SES assembles it: its headers, the caller’s, and both parts as multipart/alternative', () => {
    const eml = emlOf(EMAIL)!.toString('utf8');
    const headers = headersOf(eml);
    expect(headers.get('From')).toBe(EMAIL.from);
    expect(headers.get('To')).toBe('success+1@simulator.amazonses.com');
    expect(headers.get('Reply-To')).toBe('support@example.com');
    // Bcc is the envelope's, never a header the recipients see.
    expect(headers.has('Bcc')).toBe(false);
    expect(headers.get('Date')).toBe('Thu, 24 Dec 2026 09:30:00 +0000');
    expect(headers.get('Message-ID')).toBe('<0100018f00000000-4a1f-000000@email.amazonses.com>');
    expect(headers.get('List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    // A subject that is not ASCII: RFC 2047 words of at most 75 characters, folded, read back whole.
    const subjectLines = /^Subject: .*\r\n(?: .*\r\n)*/m.exec(eml)![0].split('\r\n').filter(Boolean);
    expect(subjectLines.length).toBeGreaterThan(1);
    for (const line of subjectLines) expect(line.replace(/^Subject: | /, '').length).toBeLessThanOrEqual(75);
    expect(decodeWords(headers.get('Subject')!)).toBe(EMAIL.subject);
    expect(headers.get('Content-Type')).toBe('multipart/alternative; boundary="----=_Part_0_0.0"');
    expect(eml).toContain(
      'Content-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n佐藤 陽翔 様\r\nクーポン XMAS-1\r\n',
    );
    expect(eml).toContain(
      'Content-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n<p>佐藤 陽翔 様</p>\r\n',
    );
    expect(eml.endsWith('------=_Part_0_0.0--\r\n')).toBe(true);
  });

  it('writes one part alone, a raw email as it was sent, and nothing for an email SES could not render', () => {
    const textOnly = emlOf({ ...EMAIL, html: undefined, subject: 'Hello' })!.toString('utf8');
    expect(headersOf(textOnly).get('Subject')).toBe('Hello');
    expect(headersOf(textOnly).get('Content-Type')).toBe('text/plain; charset=UTF-8');
    const raw = Buffer.from('From: news@example.com\r\nTo: a@example.org\r\nSubject: Raw\r\n\r\nHello.\r\n');
    expect(emlOf({ ...EMAIL, raw: true, message: raw })).toEqual(raw);
    expect(
      emlOf({ ...EMAIL, renderingFailure: "Attribute 'name' is not present in the rendering data." }),
    ).toBeUndefined();
  });

  it('writes each email to its own {MessageId}.eml in the directory it creates', () => {
    const outbox = new SesOutbox(path.join(dir, 'nested', 'emails'));
    const file = outbox.write(EMAIL);
    outbox.write({ ...EMAIL, messageId: '0100018f00000001-4a1f-000000' });
    expect(outbox.write({ ...EMAIL, messageId: 'x', renderingFailure: 'no' })).toBeUndefined();
    expect(file).toBe(path.join(dir, 'nested', 'emails', '0100018f00000000-4a1f-000000.eml'));
    expect(readFileSync(file!)).toEqual(emlOf(EMAIL));
    expect(readdirSync(outbox.directory).sort()).toEqual([
      '0100018f00000000-4a1f-000000.eml',
      '0100018f00000001-4a1f-000000.eml',
    ]);
    expect(outbox.written).toBe(2);
  });
});
