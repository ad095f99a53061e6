import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fill, MissingVariableError as LineMissingVariableError } from '#shared/campaign/template.ts';
import {
  type EmailTemplate,
  emailTemplateVariables,
  escapeHtml,
  InvalidEmailTemplateError,
  MAX_SES_TEMPLATE_DATA_CHARS,
  MissingVariableError,
  renderEmail,
  SubjectLineBreakError,
  sesTemplateContent,
  sesTemplateData,
  validateEmailTemplate,
} from '#shared/email/template.ts';

const template: EmailTemplate = {
  subject: '{{ name }}様、{{order}}のご案内',
  html: '<p title="{{name}}">{{name}}様 &amp; {{ coupon }}</p>',
  text: '{{name}}様\n{{coupon}}',
};

/**
 * SES's inline-template substitution as its documentation describes it: simple `{{key}}`
 * replacement from the JSON data, with no HTML escaping in any part
 * (https://docs.aws.amazon.com/ses/latest/dg/send-personalized-email-advanced.html).
 */
function sesSubstitute(content: string, data: Record<string, string>): string {
  return content.replace(/\{\{([a-z0-9]+)\}\}/g, (_, key: string) => data[key]!);
}

describe('email templates', () => {
  it('fills placeholders, HTML-escaping values in the HTML body only', () => {
    const email = renderEmail(template, {
      name: '<b>"Tom" & \'Jerry\'</b>',
      order: 'A&B',
      coupon: '10%<off>',
    });
    expect(email).toEqual({
      subject: '<b>"Tom" & \'Jerry\'</b>様、A&Bのご案内',
      html: '<p title="&lt;b&gt;&quot;Tom&quot; &amp; &#39;Jerry&#39;&lt;/b&gt;">&lt;b&gt;&quot;Tom&quot; &amp; &#39;Jerry&#39;&lt;/b&gt;様 &amp; 10%&lt;off&gt;</p>',
      text: '<b>"Tom" & \'Jerry\'</b>様\n10%<off>',
    });
  });

  it('names every variable of every part, in order of first use', () => {
    expect([...emailTemplateVariables(template)]).toEqual(['name', 'order', 'coupon']);
    expect([...emailTemplateVariables({ subject: 'Hello', text: 'no placeholders' })]).toEqual([]);
  });

  it('uses the LINE template’s rules: names, white space inside the braces, the same MissingVariableError', () => {
    expect(MissingVariableError).toBe(LineMissingVariableError);
    const t = { subject: 'x', text: '{{a}} {{ a }} {{\ta\t}} {a} {{{a}}} {{a.b}} {{#each}}' };
    expect([...emailTemplateVariables(t)]).toEqual(['a', 'a.b', '#each']);
    expect(renderEmail(t, { a: '1', 'a.b': '2', '#each': '3' }).text).toBe('1 1 1 {a} {1} 2 3');
    // Where LINE leaves a "{{" that is no placeholder as text, an email job is refused at creation:
    // a typo there would otherwise reach every recipient.
    for (const text of ['{{a b}}', '{{}}', '{{ }}', '{{a'])
      expect(validateEmailTemplate({ subject: 'x', text }), text).toHaveLength(1);
    const missing = (() => {
      try {
        renderEmail(template, { name: 'x', order: 'y' });
      } catch (error) {
        return error;
      }
    })();
    expect(missing).toBeInstanceOf(MissingVariableError);
    expect((missing as MissingVariableError).variable).toBe('coupon');
  });

  it('agrees with the LINE template’s fill on any text (property)', () => {
    const piece = fc.oneof(
      fc.constantFrom(
        '{{',
        '}}',
        '{',
        '}',
        ' ',
        '\t',
        '{{ a }}',
        '{{b}}',
        '{{a b}}',
        '__proto__',
        '$&',
        '$1',
      ),
      fc.string({ maxLength: 5 }),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = `s${pieces.join('')}`;
        if (validateEmailTemplate({ subject: text, text: 'x' }).length > 0) return;
        const asked: string[] = [];
        // A recorder: fill asks it for exactly the names its own rule finds.
        const recorder = new Proxy({} as Record<string, string>, {
          getOwnPropertyDescriptor: (_, name) => {
            asked.push(String(name));
            return { value: `<${String(name)}>`, enumerable: true, configurable: true };
          },
          get: (_, name) => `<${String(name)}>`,
        });
        const expected = fill(text, recorder);
        const values = Object.fromEntries(asked.map((name) => [name, `<${name}>`]));
        expect(new Set(asked)).toEqual(emailTemplateVariables({ subject: text, text: 'x' }));
        expect(renderEmail({ subject: text, text: 'x' }, values).subject).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  it('treats __proto__ as a name like any other, and never reads inherited properties', () => {
    const t = { subject: 'Hi {{__proto__}} {{constructor}}', text: '.' };
    expect(() => renderEmail(t, {})).toThrow(MissingVariableError);
    expect(renderEmail(t, JSON.parse('{"__proto__": "p", "constructor": "c"}')).subject).toBe('Hi p c');
  });

  it('inserts values literally: no $-patterns, no second pass over inserted text', () => {
    const email = renderEmail({ subject: '{{a}}', text: '{{a}}{{b}}' }, { a: "$& $' {{b}}", b: 'B' });
    expect(email).toEqual({ subject: "$& $' {{b}}", text: "$& $' {{b}}B" });
  });

  it('refuses a subject that a value would break into two header lines', () => {
    for (const value of ['a\r\nBcc: victim@example.com', 'a\nb', 'a\rb', 'a\0b']) {
      let error: unknown;
      try {
        renderEmail(template, { name: value, order: '1', coupon: 'c' });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(SubjectLineBreakError);
      expect((error as SubjectLineBreakError).variable).toBe('name');
    }
    // Line breaks are fine in the bodies.
    expect(renderEmail(template, { name: 'n', order: '1', coupon: 'a\r\nb' }).text).toBe('n様\na\r\nb');
  });

  it('lists what keeps a template from being used, in plain words', () => {
    expect(validateEmailTemplate(template)).toEqual([]);
    expect(validateEmailTemplate({ subject: 'Hi', html: '<p>x</p>' })).toEqual([]);
    expect(validateEmailTemplate(null)).toEqual([
      'an email template is an object with a subject and an html or text body',
    ]);
    expect(validateEmailTemplate([])).toHaveLength(1);
    expect(validateEmailTemplate({})).toEqual([
      'the subject is missing',
      'there is no body: give html, text or both',
    ]);
    expect(validateEmailTemplate({ subject: '  ', text: '' })).toEqual([
      'the subject is empty',
      'there is no body: give html, text or both',
    ]);
    expect(validateEmailTemplate({ subject: 'x'.repeat(998), text: 'b' })).toEqual([]);
    expect(validateEmailTemplate({ subject: 'x'.repeat(999), text: 'b' })).toEqual([
      'the subject is 999 characters long; at most 998',
    ]);
    expect(validateEmailTemplate({ subject: 'a\r\nBcc: x', text: 'b' })).toEqual([
      'the subject contains a line break',
    ]);
    expect(validateEmailTemplate({ subject: 's', html: 42, text: 'b' })).toEqual([
      'the html body must be text',
    ]);
    expect(
      validateEmailTemplate({ subject: 'Hi {{ first name }}', html: '<p>{{name}</p>', text: 'ok {{x}}' }),
    ).toEqual([
      'the subject has a "{{" that does not start a placeholder ({{name}}: a name without spaces or braces, then "}}")',
      'the html body has a "{{" that does not start a placeholder ({{name}}: a name without spaces or braces, then "}}")',
    ]);
  });

  it('refuses to render an invalid template', () => {
    expect(() => renderEmail({ subject: '', text: 'x' }, {})).toThrow(InvalidEmailTemplateError);
    expect(() => renderEmail({ subject: 'x' }, {})).toThrow(/there is no body/);
  });

  it('escapes the five HTML specials and nothing else', () => {
    expect(escapeHtml(`&<>"'`)).toBe('&amp;&lt;&gt;&quot;&#39;');
    expect(escapeHtml('日本語 é /\\ `=')).toBe('日本語 é /\\ `=');
  });
});

describe('SES template form', () => {
  it('renames placeholders: raw values in the subject and text, escaped ones in the HTML', () => {
    expect(sesTemplateContent(template)).toEqual({
      Subject: '{{v0}}様、{{v1}}のご案内',
      Html: '<p title="{{h0}}">{{h0}}様 &amp; {{h2}}</p>',
      Text: '{{v0}}様\n{{v2}}',
    });
    expect(JSON.parse(sesTemplateData(template, { name: '<T>', order: 'A&B', coupon: 'c' }))).toEqual({
      v0: '<T>',
      h0: '&lt;T&gt;',
      v1: 'A&B',
      v2: 'c',
      h2: 'c',
    });
    expect(sesTemplateContent({ subject: 'Hi', html: '<p/>' })).toEqual({ Subject: 'Hi', Html: '<p/>' });
  });

  it('gives, through SES’s documented substitution, exactly what renderEmail gives (property)', () => {
    const value = fc.string({ maxLength: 20 }).filter((s) => !/[\r\n\0]/.test(s));
    fc.assert(
      fc.property(value, value, value, (name, order, coupon) => {
        const variables = { name, order, coupon };
        const content = sesTemplateContent(template);
        const data = JSON.parse(sesTemplateData(template, variables));
        const local = renderEmail(template, variables);
        expect(sesSubstitute(content.Subject, data)).toBe(local.subject);
        expect(sesSubstitute(content.Html!, data)).toBe(local.html);
        expect(sesSubstitute(content.Text!, data)).toBe(local.text);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses literal text that Handlebars would read, which only local rendering handles', () => {
    for (const text of ['{{{a}}}', '\\{{a}}', '{{a}}}', '{{a}} }} x', 'use {{ and then']) {
      const t = { subject: 's', text };
      if (validateEmailTemplate(t).length > 0) {
        expect(() => sesTemplateContent(t)).toThrow(InvalidEmailTemplateError);
        continue;
      }
      expect(() => sesTemplateContent(t), text).toThrow(
        /braces or a backslash that SES's template engine would read/,
      );
    }
    // Single braces away from placeholders are plain text to Handlebars too.
    expect(sesTemplateContent({ subject: 's', html: '<style>p { color: red }</style>{{a}}' }).Html).toBe(
      '<style>p { color: red }</style>{{h0}}',
    );
  });

  it('refuses data SES would refuse or a subject it would break', () => {
    expect(() => sesTemplateData(template, { name: 'n', order: 'o' })).toThrow(MissingVariableError);
    expect(() => sesTemplateData(template, { name: 'a\nb', order: 'o', coupon: 'c' })).toThrow(
      SubjectLineBreakError,
    );
    const big = 'x'.repeat(MAX_SES_TEMPLATE_DATA_CHARS);
    expect(() => sesTemplateData(template, { name: 'n', order: 'o', coupon: big })).toThrow(RangeError);
  });
});
