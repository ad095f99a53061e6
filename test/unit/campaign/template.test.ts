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

describe("a placeholder that names the list's name column as its header shows it", () => {
  // The ingest keeps the name column (名前, お名前, 氏名, Name …) as the task's name, `{{name}}`.
  const task = { name: '山田太郎', coupon: 'SPRING10' };

  it('is the name, in a LINE message, an email and a text alike', async () => {
    const { renderEmail, sesTemplateData } = await import('#shared/email/template.ts');
    const { renderSms } = await import('#shared/sms/template.ts');
    expect(fill('{{お名前}}様 {{氏名}} {{ 名前 }} {{Name}} {{name}}', task)).toBe(
      '山田太郎様 山田太郎 山田太郎 山田太郎 山田太郎',
    );
    expect(
      compileTemplate({ messages: [{ type: 'text', text: '{{お名前}}様、{{coupon}}' }] }).render(task),
    ).toEqual([{ type: 'text', text: '山田太郎様、SPRING10' }]);
    const email = { subject: '{{名前}}様へ', html: '<p>{{お名前}}様</p>' };
    expect(renderEmail(email, task)).toEqual({ subject: '山田太郎様へ', html: '<p>山田太郎様</p>' });
    expect(JSON.parse(sesTemplateData(email, task))).toEqual({ v0: '山田太郎', h1: '山田太郎' });
    expect(renderSms({ body: '{{お名前}}様' }, task).body).toBe('山田太郎様');
  });

  it('is still missing for a task without a name, and any other unknown name is', () => {
    expect(() => fill('{{お名前}}', { coupon: 'x' })).toThrow(MissingVariableError);
    expect(() => fill('{{会社名}}', task)).toThrow(MissingVariableError);
  });

  it('a column of its own wins over the name', () => {
    expect(fill('{{Name}}', { ...task, Name: 'column' })).toBe('column');
  });
});
