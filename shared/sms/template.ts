/**
 * An SMS job's text: one body whose `{{variable}}` placeholders are filled from a task's
 * variables, as a LINE job's messages are (`shared/campaign/template.ts` `fill`). Nothing is
 * escaped: an SMS is plain text. What it costs is counted in message parts (`parts.ts`), which is
 * also what the origination identity's rate counts.
 */
import { fill, MissingVariableError } from '#shared/campaign/template.ts';
import { SmsError } from './errors.ts';
import { type MessageParts, messageParts } from './parts.ts';

export { MissingVariableError };

/** The longest `MessageBody` End User Messaging SMS takes (its API: 1 to 1,600 characters). */
export const MAX_SMS_BODY_CHARS = 1_600;

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

export interface SmsTemplate {
  /** The text; may hold `{{variable}}` placeholders. */
  readonly body: string;
}

/** One recipient's text and what it costs. */
export interface RenderedSms {
  readonly body: string;
  readonly parts: MessageParts;
}

/** A rendered text the service would refuse: too long, or nothing left to send. */
export class UnsendableSmsError extends SmsError {}

/** The variable names the body uses, in order of first use. */
export function smsTemplateVariables(template: SmsTemplate): string[] {
  const names: string[] = [];
  for (const match of template.body.matchAll(PLACEHOLDER))
    if (!names.includes(match[1]!)) names.push(match[1]!);
  return names;
}

/**
 * The problems that keep a template from being used for a job, in plain words; empty when there
 * are none. Takes anything, as a job-creation request may carry anything.
 */
export function validateSmsTemplate(template: unknown): string[] {
  if (template === null || typeof template !== 'object' || Array.isArray(template))
    return ['an SMS template is an object with a body'];
  const { body } = template as Record<string, unknown>;
  if (typeof body !== 'string') return ['the body is missing'];
  const problems: string[] = [];
  if (body.trim() === '') problems.push('the body is empty');
  if (body.length > MAX_SMS_BODY_CHARS)
    problems.push(`the body is ${body.length} characters long; at most ${MAX_SMS_BODY_CHARS}`);
  if (body.replace(PLACEHOLDER, '').includes('{{'))
    problems.push(
      'the body has a "{{" that does not start a placeholder ({{name}}: a name without spaces or braces, then "}}")',
    );
  return problems;
}

/**
 * One recipient's text. Throws {@link MissingVariableError} for a name the variables lack and
 * {@link UnsendableSmsError} for a text the service would refuse (empty, or over its length).
 */
export function renderSms(template: SmsTemplate, variables: Readonly<Record<string, string>>): RenderedSms {
  const body = fill(template.body, variables);
  if (body.trim() === '') throw new UnsendableSmsError('the text is empty once filled');
  if (body.length > MAX_SMS_BODY_CHARS)
    throw new UnsendableSmsError(
      `the text is ${body.length} characters once filled; at most ${MAX_SMS_BODY_CHARS}`,
    );
  return { body, parts: messageParts(body) };
}
