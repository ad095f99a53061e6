/**
 * The `message` option of a job: what a message job sends (one text, or 1 to 5 LINE message
 * objects with `{{column}}` placeholders), as the operator gives it in a JSON body or, with an
 * inline CSV upload, in the query string.
 */
import { describe, expect, it } from 'vitest';
import { compileTemplate } from '#shared/campaign/template.ts';
import { ValidationError } from '#shared/jobs/errors.ts';
import { jobOptionsFromQuery, parseClientSettings, parseJobOptions } from '#shared/jobs/validation.ts';
import { TOKYO_CLIENT } from './fakes.ts';

const NOW = Date.parse('2026-11-20T00:00:00Z');
const client = parseClientSettings('acme', { ...TOKYO_CLIENT, messageChannelId: 'line-main' }, NOW);

function fieldErrors(input: unknown): Record<string, readonly string[]> {
  try {
    parseJobOptions(input, client, NOW);
  } catch (error) {
    if (error instanceof ValidationError) return { ...error.fieldErrors };
    throw error;
  }
  throw new Error('expected a ValidationError');
}

const texts = (n: number) => Array.from({ length: n }, (_, i) => ({ type: 'text', text: `part ${i + 1}` }));

describe('a message job’s message', () => {
  it('takes a string as one text message, placeholders kept for each recipient', () => {
    const options = parseJobOptions(
      { name: 'November offer', channel: 'message', message: 'Hello {{name}}, 20% off until Friday' },
      client,
      NOW,
    );
    // `message`, the word before email, is taken for `line`.
    expect(options.channel).toBe('line');
    expect(options.message).toEqual({
      messages: [{ type: 'text', text: 'Hello {{name}}, 20% off until Friday' }],
    });
    expect(compileTemplate(options.message!).render({ name: 'Aiko' })).toEqual([
      { type: 'text', text: 'Hello Aiko, 20% off until Friday' },
    ]);
  });

  it('takes 1 to 5 LINE message objects of any type, with notificationDisabled', () => {
    const sticker = { type: 'sticker', packageId: '446', stickerId: '1988' };
    const message = {
      messages: [{ type: 'text', text: 'Thanks, {{name}}!' }, sticker],
      notificationDisabled: true,
    };
    expect(parseJobOptions({ name: 'x', channel: 'message', message }, client, NOW).message).toEqual(message);
    expect(
      parseJobOptions({ name: 'x', channel: 'message', message: { messages: texts(5) } }, client, NOW).message
        ?.messages,
    ).toHaveLength(5);
  });

  it('takes a text of exactly 5,000 characters, LINE’s longest', () => {
    const text = 'あ'.repeat(5000);
    expect(parseJobOptions({ name: 'x', channel: 'message', message: text }, client, NOW).message).toEqual({
      messages: [{ type: 'text', text }],
    });
  });

  it('is required for a message job', () => {
    expect(fieldErrors({ name: 'x', channel: 'message' })).toEqual({
      message: ['a LINE job needs its message (text, or { messages: [...] })'],
    });
  });

  it('is refused on a call job, which runs its scenario instead', () => {
    expect(fieldErrors({ name: 'x', message: 'Hello' })).toEqual({
      message: ['only a LINE job sends a message; a call job does not'],
    });
    expect(fieldErrors({ name: 'x', channel: 'call', message: 'Hello' })).toEqual({
      message: ['only a LINE job sends a message; a call job does not'],
    });
  });

  it('is refused with 6 messages: LINE takes at most 5 in one request', () => {
    expect(fieldErrors({ name: 'x', channel: 'message', message: { messages: texts(6) } })).toEqual({
      'message.messages': ['LINE takes at most 5 messages in one push'],
    });
  });

  it('is refused with no message at all', () => {
    expect(fieldErrors({ name: 'x', channel: 'message', message: { messages: [] } })).toEqual({
      'message.messages': ['must hold at least one message'],
    });
  });

  it('is refused with an empty text, as a string or as a text message', () => {
    expect(fieldErrors({ name: 'x', channel: 'message', message: '' })).toEqual({
      message: ['must not be empty'],
    });
    expect(
      fieldErrors({ name: 'x', channel: 'message', message: { messages: [{ type: 'text', text: '' }] } }),
    ).toEqual({ 'message.messages[0].text': ['must be 1 to 5000 characters'] });
  });

  it('is refused with a text over 5,000 characters, naming the message', () => {
    expect(fieldErrors({ name: 'x', channel: 'message', message: 'a'.repeat(5001) })).toEqual({
      message: ['must be at most 5000 characters'],
    });
    const long = {
      messages: [
        { type: 'text', text: 'ok' },
        { type: 'text', text: 'a'.repeat(5001) },
      ],
    };
    expect(fieldErrors({ name: 'x', channel: 'message', message: long })).toEqual({
      'message.messages[1].text': ['must be 1 to 5000 characters'],
    });
  });

  it('is refused, before it starts, with every message object LINE would refuse named at its property (issue 35 #6)', () => {
    const message = {
      messages: [
        { type: 'sticker', packageId: '446' },
        {
          type: 'image',
          originalContentUrl: 'http://example.com/a.jpg',
          previewImageUrl: 'https://example.com/p.jpg',
        },
        { type: 'flex', contents: { type: 'bubble' } },
      ],
    };
    expect(fieldErrors({ name: 'x', channel: 'message', message })).toEqual({
      'message.messages[0].stickerId': ['must be a string'],
      'message.messages[1].originalContentUrl': ['must be an https URL of at most 2000 characters'],
      'message.messages[2].altText': ['must be 1 to 1500 characters'],
    });
  });

  it('is refused when a message has no type', () => {
    const errors = fieldErrors({ name: 'x', channel: 'message', message: { messages: [{ text: 'Hello' }] } });
    expect(Object.keys(errors)).toEqual(['message.messages[0].type']);
  });

  it('reports an unknown field beside the messages, and every other problem at once', () => {
    expect(
      fieldErrors({
        name: '',
        channel: 'message',
        message: { messages: [{ type: 'text', text: 'hi' }], silent: true },
      }),
    ).toEqual({ name: ['must not be empty'], 'message.silent': ['is not a known field'] });
  });
});

describe('the message in an inline upload’s query string', () => {
  it('is read as JSON when it is an object', () => {
    const query = {
      name: 'November offer',
      channel: 'message',
      message: '{"messages":[{"type":"text","text":"Hi {{name}}"}],"notificationDisabled":true}',
    };
    const options = parseJobOptions(jobOptionsFromQuery(query), client, NOW);
    expect(options.message).toEqual({
      messages: [{ type: 'text', text: 'Hi {{name}}' }],
      notificationDisabled: true,
    });
  });

  it('is one text message when it is plain text', () => {
    const options = parseJobOptions(
      jobOptionsFromQuery({ name: 'q', channel: 'message', message: 'Hi {{name}}' }),
      client,
      NOW,
    );
    expect(options.message).toEqual({ messages: [{ type: 'text', text: 'Hi {{name}}' }] });
  });

  it('reports the same field errors as a JSON body', () => {
    const query = { name: 'q', channel: 'message', message: '{"messages":[{"type":"text","text":""}]}' };
    expect(fieldErrors(jobOptionsFromQuery(query))).toEqual({
      'message.messages[0].text': ['must be 1 to 5000 characters'],
    });
  });

  it('refuses text that starts like JSON but is not, rather than sending the braces to everyone', () => {
    const query = { name: 'q', channel: 'message', message: '{"messages": [oops' };
    expect(fieldErrors(jobOptionsFromQuery(query))).toEqual({
      message: ['starts with { but is not valid JSON'],
    });
  });
});
