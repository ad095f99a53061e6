import { describe, expect, it } from 'vitest';
import {
  compileTemplate,
  fill,
  InvalidTemplateError,
  MissingVariableError,
} from '#shared/campaign/template.ts';

describe('message templates', () => {
  it('fills placeholders anywhere in the messages, without escaping', () => {
    const template = compileTemplate({
      messages: [
        { type: 'text', text: 'こんにちは {{ name }}さん <b>&</b> {{name}}' },
        { type: 'flex', altText: 'Order {{order}}', contents: { body: ['{{order}}', 3] } },
      ],
    });
    expect(template.variables).toEqual(['name', 'order']);
    expect(template.render({ name: '山田 "太郎"', order: '{{x}}' })).toEqual([
      { type: 'text', text: 'こんにちは 山田 "太郎"さん <b>&</b> 山田 "太郎"' },
      { type: 'flex', altText: 'Order {{x}}', contents: { body: ['{{x}}', 3] } },
    ]);
  });

  it('renders the same bytes every time (a resend after a crash is byte-identical)', () => {
    const template = compileTemplate({
      messages: [{ type: 'text', text: 'Hi {{a}}', quickReply: { b: '{{b}}' } }],
    });
    const vars = { a: '1', b: '2' };
    expect(JSON.stringify(template.render(vars))).toBe(JSON.stringify(template.render({ b: '2', a: '1' })));
  });

  it('keeps a key named __proto__ a key, and leaves the template as it was', () => {
    const messages = JSON.parse(
      '[{"type":"flex","altText":"{{a}}","contents":{"__proto__":{"text":"{{a}}$&"},"fixed":{"n":1}}}]',
    );
    const template = compileTemplate({ messages });
    const [rendered] = template.render({ a: '$1' }) as unknown as [Record<string, unknown>];
    expect(JSON.stringify(rendered)).toBe(
      '{"type":"flex","altText":"$1","contents":{"__proto__":{"text":"$1$&"},"fixed":{"n":1}}}',
    );
    expect(Object.getPrototypeOf(rendered.contents)).toBe(Object.prototype);
    expect(JSON.stringify(messages)).toContain('{{a}}');
  });

  it('names the missing variable', () => {
    expect(() => fill('Dear {{name}}', {})).toThrow(MissingVariableError);
    expect(() => fill('Dear {{toString}}', {})).toThrow('{{toString}}');
    expect(fill('100% {{x}}', { x: '$&' })).toBe('100% $&');
  });

  it('a template without placeholders has no variables (it can go by multicast)', () => {
    expect(compileTemplate({ messages: [{ type: 'text', text: 'Sale {today}!' }] }).variables).toEqual([]);
  });

  it('refuses 0 or more than 5 messages', () => {
    expect(() => compileTemplate({ messages: [] })).toThrow(InvalidTemplateError);
    const six = Array.from({ length: 6 }, () => ({ type: 'text', text: 'x' }));
    expect(() => compileTemplate({ messages: six })).toThrow(InvalidTemplateError);
  });
});
