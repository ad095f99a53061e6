/** A client's email settings as an operator writes them: no configuration set of its own. */
import { describe, expect, it } from 'vitest';
import { parseClientSettings } from '#shared/jobs/validation.ts';
import { fieldErrorsOf, TOKYO_CLIENT } from '../jobs/fakes.ts';

const NOW = Date.parse('2026-11-29T00:00:00Z');
const EMAIL = { from: 'news@shop.example', fromName: 'ショップ', delivery: 'at-most-once' };

describe("a client's email settings", () => {
  it('keeps From, its name and the delivery rule as given', () => {
    expect(parseClientSettings('acme', { ...TOKYO_CLIENT, email: EMAIL }, NOW).email).toEqual(EMAIL);
  });

  it('refuses a configuration set: every email names the stack’s, the only one the brokers may send under', () => {
    const errors = fieldErrorsOf(() =>
      parseClientSettings('acme', { ...TOKYO_CLIENT, email: { ...EMAIL, configurationSet: 'mine' } }, NOW),
    );
    expect(Object.keys(errors)).toEqual(['email.configurationSet']);
  });
});
