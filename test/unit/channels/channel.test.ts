import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Channel,
  type KeywordRule,
  liveSecrets,
  MAX_MATCHED_TEXT,
  MAX_REGEX_LENGTH,
  redactChannel,
} from '#shared/channels/channel.ts';
import {
  type ChannelInput,
  channelFromInput,
  InvalidChannelError,
  rotateSecret,
} from '#shared/channels/channel-input.ts';
import { answerFor } from '#shared/channels/keyword-rules.ts';
import { signBody, verifySignature } from '#shared/line/signature.ts';

const NOW = Date.UTC(2025, 5, 2, 9);
const HOUR = 3600_000;
const SECRET = 'c0ffee00c0ffee00c0ffee00c0ffee00';
const NEW_SECRET = 'feedface0000feedface0000feedface';
const TOKEN = 'Bearer-token-AAAABBBBCCCCDDDD/eeee+ffff=';

const validInput: ChannelInput = {
  channelId: '1656000001',
  clientId: 'client-a',
  channelSecret: SECRET,
  accessToken: TOKEN,
};

/** The field errors of input that must be refused. */
function fieldErrorsOf(input: unknown): Record<string, string[]> {
  try {
    channelFromInput(input, NOW);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidChannelError);
    expect((error as Error).name).toBe('InvalidChannelError');
    return (error as InvalidChannelError).fieldErrors;
  }
  throw new Error('the input was accepted');
}

function withRules(rules: KeywordRule[], fallback?: string): Channel {
  return channelFromInput({ ...validInput, rules, ...(fallback === undefined ? {} : { fallback }) }, NOW);
}

describe('channelFromInput', () => {
  it('turns valid input into a channel with one secret and the defaults', () => {
    const channel = channelFromInput(validInput, NOW);
    expect(channel).toEqual({
      channelId: '1656000001',
      clientId: 'client-a',
      secrets: [{ value: SECRET }],
      accessToken: TOKEN,
      autoAnswer: 'push',
      rules: [],
      updatedAt: NOW,
    });
  });

  it.each([
    ['an empty id', ''],
    ['a slash', 'a/b'],
    ['a space', 'my channel'],
    ['65 characters', 'c'.repeat(65)],
  ])('refuses a channel id with %s, naming the field', (_what, channelId) => {
    expect(fieldErrorsOf({ ...validInput, channelId })).toEqual({
      channelId: ['must be 1-64 letters, digits, "_" or "-"'],
    });
  });

  it('refuses a channel secret that is too short to be LINE’s', () => {
    expect(fieldErrorsOf({ ...validInput, channelSecret: 'short' })).toEqual({
      channelSecret: ['looks too short for a LINE channel secret'],
    });
  });

  it('refuses a regex that does not compile, naming the rule', () => {
    const errors = fieldErrorsOf({
      ...validInput,
      rules: [
        { match: 'exact', pattern: 'hi', answer: 'hello' },
        { match: 'regex', pattern: '(unclosed', answer: 'x' },
      ],
    });
    expect(Object.keys(errors)).toEqual(['rules.1.pattern']);
    expect(errors['rules.1.pattern']![0]).toMatch(/^not a valid regex \(RE2 syntax/);
  });

  it(`refuses a regex longer than ${MAX_REGEX_LENGTH} characters, but not a plain pattern of that length`, () => {
    const long = 'a'.repeat(MAX_REGEX_LENGTH + 1);
    expect(fieldErrorsOf({ ...validInput, rules: [{ match: 'regex', pattern: long, answer: 'x' }] })).toEqual(
      {
        'rules.0.pattern': [`a regex may have at most ${MAX_REGEX_LENGTH} characters`],
      },
    );
    expect(() =>
      channelFromInput({ ...validInput, rules: [{ match: 'contains', pattern: long, answer: 'x' }] }, NOW),
    ).not.toThrow();
    expect(() =>
      channelFromInput(
        { ...validInput, rules: [{ match: 'regex', pattern: 'a'.repeat(MAX_REGEX_LENGTH), answer: 'x' }] },
        NOW,
      ),
    ).not.toThrow();
  });

  it('reports every bad field at once, one entry per field', () => {
    const errors = fieldErrorsOf({
      channelId: 'bad id',
      channelSecret: 'short',
      accessToken: TOKEN,
      autoAnswer: 'sometimes',
    });
    expect(Object.keys(errors).sort()).toEqual(['autoAnswer', 'channelId', 'channelSecret', 'clientId']);
  });

  it('refuses something that is not an object', () => {
    expect(Object.keys(fieldErrorsOf(null))).toEqual(['(body)']);
  });

  it('never puts the secret it was given into its error message', () => {
    try {
      channelFromInput({ ...validInput, channelId: 'bad id', channelSecret: 'x'.repeat(300) }, NOW);
      expect.unreachable();
    } catch (error) {
      expect((error as Error).message).not.toContain('x'.repeat(300));
    }
  });
});

describe('answerFor', () => {
  it('answers an exact keyword, ignoring surrounding spaces, case-sensitive unless told', () => {
    const channel = withRules([{ match: 'exact', pattern: 'hours', answer: 'Open 9-18' }]);
    expect(answerFor(channel, '  hours \n')).toBe('Open 9-18');
    expect(answerFor(channel, 'Hours')).toBeUndefined();
    expect(answerFor(channel, 'opening hours')).toBeUndefined();
  });

  it('answers a keyword contained anywhere in the text', () => {
    const channel = withRules([{ match: 'contains', pattern: 'help', answer: 'An operator will call' }]);
    expect(answerFor(channel, 'I need help please')).toBe('An operator will call');
    expect(answerFor(channel, 'HELP')).toBeUndefined();
  });

  it('answers a regex, with whole-code-point matching for emoji', () => {
    const channel = withRules([
      { match: 'regex', pattern: '^order #(\\d{4,})$', answer: 'Looking up your order' },
      { match: 'regex', pattern: '^.$', answer: 'One character?' },
    ]);
    expect(answerFor(channel, 'order #12345')).toBe('Looking up your order');
    expect(answerFor(channel, 'order #12')).toBeUndefined();
    expect(answerFor(channel, '👋')).toBe('One character?');
  });

  it('ignores case when the rule says so, for each kind of match', () => {
    const channel = withRules([
      { match: 'exact', pattern: 'Hours', answer: 'exact', ignoreCase: true },
      { match: 'contains', pattern: 'HELP', answer: 'contains', ignoreCase: true },
      { match: 'regex', pattern: '^price', answer: 'regex', ignoreCase: true },
    ]);
    expect(answerFor(channel, 'HOURS')).toBe('exact');
    expect(answerFor(channel, 'please Help me')).toBe('contains');
    expect(answerFor(channel, 'PRICE list')).toBe('regex');
  });

  it('answers with the first rule that matches, in the order the operator gave', () => {
    const channel = withRules([
      { match: 'contains', pattern: 'price', answer: 'first' },
      { match: 'exact', pattern: 'price', answer: 'second' },
    ]);
    expect(answerFor(channel, 'price')).toBe('first');
  });

  it('falls back when no rule matches, and gives no answer without a fallback', () => {
    const rules: KeywordRule[] = [{ match: 'exact', pattern: 'hours', answer: 'Open 9-18' }];
    expect(answerFor(withRules(rules, 'Sorry, send "help"'), 'what?')).toBe('Sorry, send "help"');
    expect(answerFor(withRules(rules), 'what?')).toBeUndefined();
  });

  it(`matches only the first ${MAX_MATCHED_TEXT} characters of a long message`, () => {
    const channel = withRules([{ match: 'contains', pattern: 'help', answer: 'An operator will call' }]);
    expect(answerFor(channel, `${'x'.repeat(MAX_MATCHED_TEXT - 4)}help`)).toBe('An operator will call');
    expect(answerFor(channel, `${'x'.repeat(MAX_MATCHED_TEXT)}help`)).toBeUndefined();
  });
});

describe('rotateSecret and liveSecrets', () => {
  const body = Buffer.from('{"destination":"U1","events":[]}');

  it('verifies webhooks signed with the old secret until it retires, and only the new one after', () => {
    const before = channelFromInput(validInput, NOW - HOUR);
    const rotated = rotateSecret(before, NEW_SECRET, NOW, 24 * HOUR);
    expect(rotated.updatedAt).toBe(NOW);

    const during = liveSecrets(rotated, NOW + 24 * HOUR - 1);
    expect(verifySignature(body, signBody(body, NEW_SECRET), during)).toBe(true);
    expect(verifySignature(body, signBody(body, SECRET), during)).toBe(true);

    const after = liveSecrets(rotated, NOW + 24 * HOUR);
    expect(after).toEqual([NEW_SECRET]);
    expect(verifySignature(body, signBody(body, SECRET), after)).toBe(false);
    expect(verifySignature(body, signBody(body, NEW_SECRET), after)).toBe(true);
  });

  it('keeps the old secret 24 hours by default', () => {
    const rotated = rotateSecret(channelFromInput(validInput, NOW), NEW_SECRET, NOW);
    expect(liveSecrets(rotated, NOW + 24 * HOUR - 1)).toEqual([NEW_SECRET, SECRET]);
    expect(liveSecrets(rotated, NOW + 24 * HOUR)).toEqual([NEW_SECRET]);
  });

  it('keeps at most two live secrets when rotated twice within the grace period', () => {
    const third = 'abcdef0123456789abcdef0123456789';
    const once = rotateSecret(channelFromInput(validInput, NOW), NEW_SECRET, NOW);
    const twice = rotateSecret(once, third, NOW + HOUR);
    expect(liveSecrets(twice, NOW + HOUR)).toEqual([third, NEW_SECRET]);
  });

  it('refuses a new secret that is too short and changes nothing', () => {
    const channel = channelFromInput(validInput, NOW);
    expect(() => rotateSecret(channel, 'short', NOW)).toThrow(InvalidChannelError);
    expect(liveSecrets(channel, NOW)).toEqual([SECRET]);
  });

  it('does not keep a retiring copy when "rotating" to the same secret', () => {
    const channel = channelFromInput(validInput, NOW);
    expect(rotateSecret(channel, SECRET, NOW).secrets).toEqual([{ value: SECRET }]);
  });
});

describe('redactChannel', () => {
  it('shows everything but the secrets and the token', () => {
    const rotated = rotateSecret(
      channelFromInput({ ...validInput, greeting: 'Welcome!', fallback: 'Sorry?' }, NOW),
      NEW_SECRET,
      NOW,
    );
    const redacted = redactChannel(rotated);
    const printed = JSON.stringify(redacted);
    expect(printed).not.toContain(SECRET);
    expect(printed).not.toContain(NEW_SECRET);
    expect(printed).not.toContain(TOKEN);
    expect(redacted).toMatchObject({
      channelId: '1656000001',
      clientId: 'client-a',
      greeting: 'Welcome!',
      fallback: 'Sorry?',
      autoAnswer: 'push',
    });
    expect(redacted['secrets']).toEqual([
      { value: expect.any(String) },
      { value: expect.any(String), retiresAt: NOW + 24 * HOUR },
    ]);
  });

  it('never contains a secret or token, whatever they are', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[0-9a-f]{32}$/),
        fc.stringMatching(/^[0-9a-f]{32}$/),
        fc.stringMatching(/^[A-Za-z0-9+/]{20,200}={0,2}$/),
        (secret, next, token) => {
          fc.pre(secret !== next);
          const channel = rotateSecret(
            channelFromInput({ ...validInput, channelSecret: secret, accessToken: token }, NOW),
            next,
            NOW,
          );
          const printed = JSON.stringify(redactChannel(channel));
          return !printed.includes(secret) && !printed.includes(next) && !printed.includes(token);
        },
      ),
    );
  });
});
