/**
 * The suppression list's rules and use cases without a store of record: how recipients are read,
 * which reasons are kept, and which requests are refused with which field errors. The store here is
 * a plain map (the DynamoDB store is tested against DynamoDB Local in the integration suite).
 */
import { describe, expect, it } from 'vitest';
import { ClientNotFoundError, ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import { messageOutcomeMove } from '#shared/jobs/task-lifecycle.ts';
import { SuppressionsApi } from '#shared/suppressions/api.ts';
import {
  entryReason,
  isSuppressedReason,
  readSuppressionRecipient,
  SUPPRESSION_REASON_MAX,
  type SuppressionEntry,
  suppressedReason,
} from '#shared/suppressions/model.ts';
import type { SuppressionStore } from '#shared/suppressions/ports.ts';
import { parseCallStatusEvent } from '#shared/telephony/status-event.ts';
import { twilioStatusEvent } from '#shared/telephony/twilio.ts';

const LINE_ID = `U${'0123456789abcdef'.repeat(2)}`;

class MapStore implements SuppressionStore {
  readonly entries = new Map<string, SuppressionEntry>();
  async add(_clientId: string, entries: readonly SuppressionEntry[]) {
    for (const e of entries) this.entries.set(e.recipient, e);
  }
  async suppressed(_clientId: string, recipients: readonly string[]) {
    return new Map(recipients.filter((r) => this.entries.has(r)).map((r) => [r, this.entries.get(r)!]));
  }
  async remove(_clientId: string, recipient: string) {
    return this.entries.delete(recipient);
  }
  async removeIfFrom() {
    return false;
  }
  async page() {
    return { entries: [...this.entries.values()] };
  }
}

function api(store = new MapStore()) {
  const client = { clientId: 'c1', defaultRegion: 'JP' } as ClientSettings;
  return new SuppressionsApi({
    clients: { get: async (id) => (id === 'c1' ? client : undefined) },
    store,
    clock: { now: () => Date.parse('2026-11-25T00:00:00Z') },
  });
}

async function fieldErrorsOf(promise: Promise<unknown>): Promise<Record<string, readonly string[]>> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  return { ...(error as ValidationError).fieldErrors };
}

describe('a suppression recipient', () => {
  it('is read as a list row is: a national number in the client region to E.164, a LINE id as is', () => {
    expect(readSuppressionRecipient('090-1234-5678', 'JP')).toEqual({
      ok: true,
      recipient: '+819012345678',
      kind: 'phone',
    });
    expect(readSuppressionRecipient('+1 415 555 2671', 'JP')).toMatchObject({ recipient: '+14155552671' });
    expect(readSuppressionRecipient('０９０１２３４５６７８', 'JP')).toMatchObject({
      recipient: '+819012345678',
    });
    expect(readSuppressionRecipient(LINE_ID, 'JP')).toEqual({ ok: true, recipient: LINE_ID, kind: 'line' });
    const bad = readSuppressionRecipient('call me', 'JP');
    expect(bad.ok).toBe(false);
  });

  it('ends a task with "suppressed: <source>", a reason the report and a message outcome keep', () => {
    expect(suppressedReason('call-outcome')).toBe('suppressed: call-outcome');
    expect(isSuppressedReason('suppressed: api')).toBe(true);
    expect(isSuppressedReason('job cancelled')).toBe(false);
    const move = messageOutcomeMove(
      { kind: 'skipped', lastResult: 'suppressed', reason: 'suppressed: csv' },
      { cancelled: false, endedBeforeReady: false },
    );
    expect(move).toMatchObject({ state: 'cancelled', reason: 'suppressed: csv' });
  });

  it('keeps a reason trimmed and bounded, or the source default', () => {
    expect(entryReason('  asked  ', 'api')).toBe('asked');
    expect(entryReason(undefined, 'line-unfollow')).toBe('the recipient unfollowed the LINE channel');
    expect([...entryReason('あ'.repeat(600), 'csv')]).toHaveLength(SUPPRESSION_REASON_MAX);
  });
});

describe('the suppression use cases', () => {
  it('adds recipients once each, with source api and the time', async () => {
    const store = new MapStore();
    const answer = await api(store).add('c1', { recipients: ['090-1234-5678', '09012345678', LINE_ID] });
    expect(answer.suppressions.map((s) => s.recipient)).toEqual(['+819012345678', LINE_ID]);
    expect(store.entries.get('+819012345678')).toMatchObject({
      source: 'api',
      reason: 'added by an operator',
      addedAt: Date.parse('2026-11-25T00:00:00Z'),
    });
  });

  it('refuses bad bodies naming each field', async () => {
    const s = api();
    expect(await fieldErrorsOf(s.add('c1', { recipients: ['090-1234-5678', 'x', '12'] }))).toHaveProperty(
      'recipients[1]',
    );
    expect(Object.keys(await fieldErrorsOf(s.add('c1', { recipients: [] })))).toEqual(['recipients']);
    expect(
      Object.keys(await fieldErrorsOf(s.add('c1', { recipients: Array(101).fill('09012345678') }))),
    ).toEqual(['recipients']);
    expect(Object.keys(await fieldErrorsOf(s.add('c1', { recipient: 'x', recipients: [] })))).toEqual([
      'recipient',
    ]);
    expect(Object.keys(await fieldErrorsOf(s.add('c1', { recipients: ['09012345678'], reason: 3 })))).toEqual(
      ['reason'],
    );
    expect(Object.keys(await fieldErrorsOf(s.add('c1', [])))).toEqual(['body']);
    expect(Object.keys(await fieldErrorsOf(s.find('c1', { recipient: '09012345678', limit: '5' })))).toEqual([
      'limit',
    ]);
    expect(Object.keys(await fieldErrorsOf(s.find('c1', { limit: '501', colour: 'x' }))).sort()).toEqual([
      'colour',
      'limit',
    ]);
    expect(Object.keys(await fieldErrorsOf(s.remove('c1', 'nobody')))).toEqual(['recipient']);
    await expect(s.find('c2', {})).rejects.toBeInstanceOf(ClientNotFoundError);
  });

  it('reads an upload as a call list: bad rows reported with row, column and reason, good ones added', async () => {
    const store = new MapStore();
    const csv = Buffer.from(
      '\uFEFF携帯電話,備考\n090-1111-2222,本人\nabc,\n090-1111-2222,\n080-3333-4444,\n',
    );
    const answer = await api(store).upload('c1', csv, {});
    expect(answer).toMatchObject({ dataRows: 4, added: 2, rejected: 1, skipped: 1 });
    expect(answer.problems.map((p) => [p.row, p.column, p.outcome])).toEqual([
      [3, '携帯電話', 'rejected'],
      [4, '携帯電話', 'skipped'],
    ]);
    expect(store.entries.get('+819011112222')).toMatchObject({ source: 'csv', reason: '本人' });
    expect(store.entries.get('+818033334444')?.reason).toBe('uploaded in a suppression list');
  });

  it('refuses an upload it cannot read as a list, naming the headers found', async () => {
    const errors = await fieldErrorsOf(api().upload('c1', Buffer.from('住所\n東京都\n'), {}));
    expect(errors.file?.[0]).toMatch(/住所/);
    expect(
      Object.keys(await fieldErrorsOf(api().upload('c1', Buffer.from('phone\n1\n'), { x: '1' }))),
    ).toEqual(['x']);
  });
});

describe('a call outcome that asks to opt out', () => {
  it('is the optOut field of the HTTP contract', () => {
    const body = {
      callId: 'c',
      idempotencyKey: 'k',
      status: 'completed',
      at: '2026-01-01T00:00:00.000Z',
      sequence: 3,
      optOut: true,
    };
    expect(parseCallStatusEvent(JSON.stringify(body)).optOut).toBe(true);
    expect(parseCallStatusEvent(JSON.stringify({ ...body, optOut: undefined })).optOut).toBeUndefined();
    expect(() => parseCallStatusEvent(JSON.stringify({ ...body, optOut: 'yes' }))).toThrow(/optOut/);
  });

  it("is Twilio's Digits=9 of a Gather's action request", () => {
    const params = (digits: string): [string, string][] => [
      ['CallSid', `CA${'a'.repeat(32)}`],
      ['CallStatus', 'in-progress'],
      ['Digits', digits],
    ];
    expect(twilioStatusEvent(params('9'), 'k', 0).optOut).toBe(true);
    expect(twilioStatusEvent(params('1'), 'k', 0).optOut).toBeUndefined();
  });
});
