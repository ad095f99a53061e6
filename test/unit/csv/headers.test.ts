import { describe, expect, it } from 'vitest';
import { columnLetter, mapHeader } from '#shared/csv/headers.ts';

describe('mapHeader', () => {
  it.each([
    '電話番号',
    '携帯電話番号',
    '電話',
    'TEL',
    'ＴＥＬ',
    'phone',
    'Phone Number',
    'phone_number',
    'PHONE-NUMBER',
    'ＰＨＯＮＥ　ＮＵＭＢＥＲ',
    'mobile',
    '携帯番号',
  ])('finds the phone column named %j for a call job', (header) => {
    expect(mapHeader(['メモ', ` ${header} `], 'call')).toMatchObject({ ok: true, map: { recipient: 1 } });
  });

  it.each(['userId', 'user_id', 'line_user_id', 'LINE User ID', 'ＬＩＮＥユーザーＩＤ'])(
    'finds the LINE user id column named %j for a message job',
    (header) => {
      expect(mapHeader(['name', header], 'line')).toMatchObject({
        ok: true,
        map: { recipient: 1, name: 0 },
      });
    },
  );

  it.each(['name', '氏名', '名前', 'お名前', 'Full Name'])('finds the name column named %j', (header) => {
    expect(mapHeader(['TEL', header], 'call')).toMatchObject({ ok: true, map: { name: 1 } });
  });

  it('keeps every other column as a variable keyed by its header as written, made unique', () => {
    const mapping = mapHeader(['電話番号', 'お名前', ' 会社名 ', 'メモ', 'メモ', '', '携帯電話番号'], 'call');
    expect(mapping).toEqual({
      ok: true,
      map: {
        headers: ['電話番号', 'お名前', '会社名', 'メモ', 'メモ', '', '携帯電話番号'],
        recipient: 0,
        name: 1,
        variables: [
          { index: 2, key: '会社名' },
          { index: 3, key: 'メモ' },
          { index: 4, key: 'メモ (2)' },
          { index: 5, key: 'F' },
          { index: 6, key: '携帯電話番号' },
        ],
        identifiers: [{ index: 6, kind: 'phone' }],
      },
    });
  });

  it('drops the empty cells at the end of the header row (Excel writes them), keeping empty ones in between', () => {
    expect(mapHeader(['phone', '', 'name', '', ' ', ''], 'call')).toEqual({
      ok: true,
      map: {
        headers: ['phone', '', 'name'],
        recipient: 0,
        name: 2,
        variables: [{ index: 1, key: 'B' }],
        identifiers: [],
      },
    });
  });

  it('takes an explicit recipient column over the aliases', () => {
    expect(mapHeader(['電話番号', '自宅の番号'], 'call', { recipientColumn: '自宅の番号' })).toMatchObject({
      ok: true,
      map: { recipient: 1 },
    });
    expect(mapHeader(['電話番号'], 'call', { recipientColumn: 'home' })).toEqual({
      ok: false,
      reason: 'no column named "home": the header row has 電話番号',
    });
  });

  it('says which headers it found when the recipient column is missing', () => {
    expect(mapHeader(['氏名', '', '住所'], 'call')).toEqual({
      ok: false,
      reason:
        'no phone number column (name it 電話番号, 携帯電話番号, TEL or phone): the header row has 氏名, 住所',
    });
    expect(mapHeader([''], 'line')).toEqual({
      ok: false,
      reason: 'no LINE user id column (name it userId or line_user_id): the header row is empty',
    });
  });
});

describe('columnLetter', () => {
  it.each([
    [0, 'A'],
    [25, 'Z'],
    [26, 'AA'],
    [701, 'ZZ'],
    [702, 'AAA'],
  ])('%i → %s', (index, letter) => {
    expect(columnLetter(index)).toBe(letter);
  });
});
