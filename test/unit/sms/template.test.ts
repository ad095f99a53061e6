/** An SMS job's text: its placeholders, what keeps it from a job, and one recipient's rendering. */
import { describe, expect, it } from 'vitest';
import {
  MAX_SMS_BODY_CHARS,
  MissingVariableError,
  renderSms,
  smsTemplateVariables,
  UnsendableSmsError,
  validateSmsTemplate,
} from '#shared/sms/template.ts';

describe('SMS templates', () => {
  it('names its variables in order of first use', () => {
    expect(smsTemplateVariables({ body: '{{name}}様 {{ time }} {{name}}' })).toEqual(['name', 'time']);
  });

  it.each([
    [null, ['an SMS template is an object with a body']],
    [{}, ['the body is missing']],
    [{ body: '  ' }, ['the body is empty']],
    [{ body: 'x'.repeat(MAX_SMS_BODY_CHARS + 1) }, [`the body is 1601 characters long; at most 1600`]],
    [{ body: 'Hi {{ first name}}' }, [expect.stringContaining('does not start a placeholder')]],
    [{ body: 'Hi {{name}}' }, []],
  ])('validates %j', (template, problems) => {
    expect(validateSmsTemplate(template)).toEqual(problems);
  });

  it('renders a recipient text with its parts; nothing is escaped', () => {
    expect(renderSms({ body: '{{name}} <b>&' }, { name: 'Ann' })).toEqual({
      body: 'Ann <b>&',
      parts: { encoding: 'GSM', parts: 1, characters: 8 },
    });
    expect(renderSms({ body: '{{name}}様' }, { name: '佐藤' }).parts).toMatchObject({
      encoding: 'UCS2',
      parts: 1,
    });
  });

  it('refuses a missing variable, an empty text and one over the length once filled', () => {
    expect(() => renderSms({ body: '{{name}}' }, {})).toThrow(MissingVariableError);
    expect(() => renderSms({ body: '{{name}}' }, { name: ' ' })).toThrow(UnsendableSmsError);
    expect(() => renderSms({ body: '{{name}}' }, { name: 'x'.repeat(1_601) })).toThrow(UnsendableSmsError);
  });
});
