/**
 * The largest list Switchboard reads: one rule, said in one sentence, for every way a list
 * arrives. The ingest enforces it on the object S3 stored (the size S3 reports in its event, so a
 * presigned PUT of any size, or a file dropped in the bucket, is refused the same way); the console
 * and the CLI check it before they upload, with the same words, so an operator learns it early.
 *
 * No imports: the browser console bundles this file too.
 */

/** 1 GiB: some 40 million short rows, far beyond any call or message list. */
export const MAX_UPLOAD_BYTES = 1024 ** 3;

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** `1 GiB`, `1.5 GiB`, `512 MiB`, `12 bytes`. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  const shown = Number.isInteger(value) ? String(value) : value.toFixed(1);
  return `${shown} ${UNITS[unit]}`;
}

/** A size in binary units, with the exact count of bytes when the unit rounds it. */
function sized(bytes: number): string {
  return bytes < 1024 ? formatBytes(bytes) : `${formatBytes(bytes)} (${bytes} bytes)`;
}

/**
 * Why a list of `bytes` bytes is refused, or undefined when its size is fine. The reason names the
 * limit, so the operator knows what to split the list into.
 */
export function uploadTooLargeReason(bytes: number, limit: number = MAX_UPLOAD_BYTES): string | undefined {
  if (bytes <= limit) return undefined;
  return `the file is ${sized(bytes)}: a list may be at most ${sized(limit)}; split it into smaller lists`;
}
