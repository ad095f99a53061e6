/** People: identifiers seen together become one person (`shared/people/model.ts`), read from a list's rows. */
import { describe, expect, it } from 'vitest';
import { mapHeader } from '#shared/csv/headers.ts';
import {
  connectedGroups,
  identifierKind,
  type LinkState,
  planLink,
  type StoredPerson,
} from '#shared/people/model.ts';
import { ingestBytes } from '../csv/support.ts';

const PHONE = '+819011110001';
const MAIL = 'taro@example.jp';
const LINE = `U${'a'.repeat(32)}`;
let keys = 0;
const newKey = () => `PNEW${++keys}`;

function state(persons: readonly StoredPerson[]): LinkState {
  return {
    links: new Map(persons.flatMap((p) => p.members.map((m) => [m, p.person] as const))),
    persons: new Map(persons.map((p) => [p.person, p])),
  };
}

describe('linking identifiers into a person', () => {
  it('knows an identifier’s kind by its form', () => {
    expect([PHONE, MAIL, LINE].map(identifierKind)).toEqual(['phone', 'email', 'line']);
  });

  it('makes a new person of identifiers none of which is linked', () => {
    expect(planLink([PHONE, MAIL, PHONE], state([]), newKey)).toEqual({
      kind: 'link',
      person: 'PNEW1',
      before: undefined,
      members: [PHONE, MAIL],
      links: [{ identifier: PHONE }, { identifier: MAIL }],
      dropped: [],
      guards: [],
    });
  });

  it('writes nothing when they already are one person', () => {
    const p = { person: 'PA', members: [PHONE, MAIL], version: 1 };
    expect(planLink([MAIL, PHONE], state([p]), newKey)).toEqual({ kind: 'same', person: 'PA' });
  });

  it('adds an unlinked identifier to the person another one of the row is', () => {
    const p = { person: 'PA', members: [PHONE, MAIL], version: 3 };
    expect(planLink([MAIL, LINE], state([p]), newKey)).toMatchObject({
      kind: 'link',
      person: 'PA',
      before: p,
      members: [PHONE, MAIL, LINE],
      links: [{ identifier: LINE }],
      dropped: [],
    });
  });

  it('joins two persons into the larger (ties: the smaller key), moving the other’s links', () => {
    const small = { person: 'PB', members: [LINE], version: 1 };
    const large = { person: 'PC', members: [PHONE, '+819011110002'], version: 2 };
    const plan = planLink([LINE, PHONE], state([small, large]), newKey);
    expect(plan).toMatchObject({
      kind: 'link',
      person: 'PC',
      members: [PHONE, '+819011110002', LINE],
      links: [{ identifier: LINE, from: 'PB' }],
      dropped: [small],
    });
    const tie = planLink([LINE, MAIL], state([small, { person: 'PA', members: [MAIL], version: 1 }]), newKey);
    expect(tie).toMatchObject({ person: 'PA', links: [{ identifier: LINE, from: 'PB' }] });
  });

  it('reads again when links and members were read at different moments (an identifier would be written twice)', () => {
    // X had no link when links were read; a writer added it to PB before PB's members were read.
    const pa = { person: 'PA', members: [PHONE, '+819011110002'], version: 1 };
    const pb = { person: 'PB', members: [LINE, MAIL], version: 2 };
    const read: LinkState = {
      links: new Map([
        [PHONE, 'PA'],
        [LINE, 'PB'],
      ]),
      persons: new Map([
        ['PA', pa],
        ['PB', pb],
      ]),
    };
    expect(planLink([PHONE, LINE, MAIL], read, newKey)).toEqual({ kind: 'stale' });
  });

  it('guards the group’s identifiers already linked to the kept person, which nothing else writes', () => {
    const p = { person: 'PA', members: [PHONE, MAIL], version: 3 };
    expect(planLink([MAIL, PHONE, LINE], state([p]), newKey)).toMatchObject({ guards: [MAIL, PHONE] });
  });

  it('refuses a person of more than 20 identifiers', () => {
    const big = {
      person: 'PA',
      members: Array.from({ length: 20 }, (_, i) => `+8190111100${10 + i}`),
      version: 1,
    };
    expect(planLink([big.members[0]!, MAIL], state([big]), newKey)).toMatchObject({ kind: 'too-many' });
  });

  it('groups a page’s rows that share an identifier, transitively', () => {
    const groups = connectedGroups([[PHONE, MAIL], ['x@example.jp'], [MAIL, LINE], ['+819022220002']]);
    expect(groups.map((g) => g.sort())).toEqual([
      [PHONE, LINE, MAIL].sort(),
      ['x@example.jp'],
      ['+819022220002'],
    ]);
  });
});

describe("a list row's other identifiers", () => {
  it('are found under phone, LINE and email headers besides the recipient’s', () => {
    const mapping = mapHeader(['メールアドレス', '名前', '携帯電話番号', 'userId', 'メモ'], 'email');
    expect(mapping).toMatchObject({
      ok: true,
      map: {
        recipient: 0,
        identifiers: [
          { index: 2, kind: 'phone' },
          { index: 3, kind: 'line' },
        ],
      },
    });
  });

  it('are read normalised; a cell that is not one is left out and the row is kept', async () => {
    const csv = [
      'メールアドレス,携帯電話番号,userId',
      `Taro@Example.jp,090-1111-0001,${LINE}`,
      'hanako@example.jp,not a number,',
      'jiro@example.jp,,',
    ].join('\n');
    const { tasks: drafts } = await ingestBytes(Buffer.from(csv), { channel: 'email' });
    expect(drafts.map((d) => [d.recipient, d.identifiers])).toEqual([
      [MAIL, [PHONE, LINE]],
      ['hanako@example.jp', undefined],
      ['jiro@example.jp', undefined],
    ]);
  });
});
