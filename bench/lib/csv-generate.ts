/**
 * Generates a call list like a real export: `電話番号,氏名,プラン` with numbers written the way
 * people type them (dashes, no dashes, +81), about 1% invalid numbers and 1% duplicates.
 * Written as a stream, so a million rows cost no memory.
 */

import { once } from 'node:events';
import { createWriteStream } from 'node:fs';

/** Row i's phone cell; every 97th is invalid, every 89th repeats an earlier number. */
export function phoneCell(i: number): string {
  if (i % 97 === 96) return `0X0-${i}`;
  const n = i % 89 === 88 ? i - 50 : i;
  // Japanese mobile numbers: 0[789]0 then a subscriber number that does not start with 0.
  const subscriber = String(10_000_000 + (n % 90_000_000));
  const prefix = ['090', '080', '070'][Math.floor(n / 90_000_000) % 3]!;
  switch (n % 3) {
    case 0:
      return `${prefix}-${subscriber.slice(0, 4)}-${subscriber.slice(4)}`;
    case 1:
      return `${prefix}${subscriber}`;
    default:
      return `+81 ${prefix.slice(1)} ${subscriber.slice(0, 4)} ${subscriber.slice(4)}`;
  }
}

/** Writes a CSV of `rows` data rows to `file`; returns its size in bytes. */
export async function generateCallList(file: string, rows: number): Promise<number> {
  const out = createWriteStream(file);
  let bytes = 0;
  const write = async (text: string) => {
    bytes += Buffer.byteLength(text);
    if (!out.write(text)) await once(out, 'drain');
  };
  await write('\ufeff電話番号,氏名,プラン\r\n');
  let chunk = '';
  for (let i = 0; i < rows; i++) {
    chunk += `${phoneCell(i)},顧客${i},${i % 2 === 0 ? 'gold' : 'silver'}\r\n`;
    if (chunk.length > 64 * 1024) {
      await write(chunk);
      chunk = '';
    }
  }
  await write(chunk);
  out.end();
  await once(out, 'finish');
  return bytes;
}
