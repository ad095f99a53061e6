import { describe, expect, it } from 'vitest';
import { InvalidUlidError } from '#shared/ids.ts';
import { backoffDelay } from '#shared/line/messaging-client.ts';
import { parseWebhookBody } from '#shared/line/webhook.ts';
import {
  isRetryKey,
  RETRY_KEY_LIFETIME_MS,
  RETRY_KEY_SAFETY_MARGIN_MS,
  retryKeyStillSafe,
  webhookRetryKey,
} from '#shared/retry-keys.ts';
import { fixtureBytes } from './line/fixtures.ts';

const HOUR = 60 * 60 * 1000;

describe('webhookRetryKey', () => {
  it('is the event’s ULID as a UUID, the same for a redelivered copy', () => {
    const [original] = parseWebhookBody(fixtureBytes('follow-unblocked')).events;
    const redelivered = { ...original!, deliveryContext: { isRedelivery: true } };
    const key = webhookRetryKey(original!.webhookEventId);
    expect(key).toBe('017fce45-034d-6dbd-8dce-b339fb360ff8');
    expect(isRetryKey(key)).toBe(true);
    expect(webhookRetryKey(redelivered.webhookEventId)).toBe(key);
  });

  it('differs between events', () => {
    const keys = parseWebhookBody(fixtureBytes('several-events')).events.map((e) =>
      webhookRetryKey(e.webhookEventId),
    );
    expect(new Set(keys).size).toBe(3);
  });

  it('refuses an ID that is not a ULID', () => {
    expect(() => webhookRetryKey('testwebhookeventid')).toThrow(InvalidUlidError);
  });
});

describe('retryKeyStillSafe', () => {
  const first = Date.UTC(2025, 0, 1);

  it('allows retries for 23 hours after the key was first used', () => {
    expect(RETRY_KEY_LIFETIME_MS - RETRY_KEY_SAFETY_MARGIN_MS).toBe(23 * HOUR);
    expect(retryKeyStillSafe(first, first)).toBe(true);
    expect(retryKeyStillSafe(first, first + 23 * HOUR - 1)).toBe(true);
  });

  it('forbids them from then on, before LINE forgets the key and would deliver again', () => {
    expect(retryKeyStillSafe(first, first + 23 * HOUR)).toBe(false);
    expect(retryKeyStillSafe(first, first + 25 * HOUR)).toBe(false);
  });

  it('takes another margin', () => {
    expect(retryKeyStillSafe(first, first + 23.5 * HOUR, 0)).toBe(true);
    expect(retryKeyStillSafe(first, first + 22 * HOUR, 2 * HOUR)).toBe(false);
  });
});

describe('backoffDelay (full jitter)', () => {
  it('waits between 0 and min(cap, base * 2^attempt)', () => {
    const options = { baseMs: 100, capMs: 5000 };
    expect(backoffDelay(0, { ...options, random: () => 0 })).toBe(0);
    expect(backoffDelay(0, { ...options, random: () => 0.999999 })).toBe(99);
    expect(backoffDelay(3, { ...options, random: () => 0.5 })).toBe(400);
    expect(backoffDelay(10, { ...options, random: () => 0.5 })).toBe(2500);
    expect(backoffDelay(1000, { ...options, random: () => 0.999999 })).toBe(4999);
  });

  it('spreads the waits of many senders over the whole window', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const waits = Array.from({ length: 1000 }, () => backoffDelay(4, { baseMs: 100, capMs: 10_000, random }));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...waits)).toBeLessThan(1600);
    expect(new Set(waits.map((w) => Math.floor(w / 400))).size).toBe(4);
  });

  it('refuses a negative or fractional attempt', () => {
    expect(() => backoffDelay(-1)).toThrow(RangeError);
    expect(() => backoffDelay(1.5)).toThrow(RangeError);
  });
});
