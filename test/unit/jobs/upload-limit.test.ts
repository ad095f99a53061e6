import { describe, expect, it } from 'vitest';
import { formatBytes, MAX_UPLOAD_BYTES, uploadTooLargeReason } from '#shared/jobs/upload-limit.ts';

describe('the largest list Switchboard reads', () => {
  it('is 1 GiB', () => {
    expect(MAX_UPLOAD_BYTES).toBe(1024 * 1024 * 1024);
  });

  it('takes a file of exactly the limit, and refuses one byte more with a reason naming the limit', () => {
    expect(uploadTooLargeReason(MAX_UPLOAD_BYTES)).toBeUndefined();
    expect(uploadTooLargeReason(1)).toBeUndefined();
    expect(uploadTooLargeReason(MAX_UPLOAD_BYTES + 1)).toBe(
      'the file is 1.0 GiB (1073741825 bytes): a list may be at most 1 GiB (1073741824 bytes); split it into smaller lists',
    );
    expect(uploadTooLargeReason(3 * 1024 ** 3 + 512 * 1024 ** 2)).toMatch(
      /^the file is 3\.5 GiB \(3758096384 bytes\): a list may be at most 1 GiB /,
    );
  });

  it('applies a lower limit when one is given', () => {
    expect(uploadTooLargeReason(100, 100)).toBeUndefined();
    expect(uploadTooLargeReason(101, 100)).toBe(
      'the file is 101 bytes: a list may be at most 100 bytes; split it into smaller lists',
    );
  });

  it('says sizes in binary units', () => {
    expect(formatBytes(0)).toBe('0 bytes');
    expect(formatBytes(1023)).toBe('1023 bytes');
    expect(formatBytes(1024)).toBe('1 KiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(512 * 1024 ** 2)).toBe('512 MiB');
  });
});
