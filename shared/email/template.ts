/**
 * Email templates of an `email` job: a subject and an HTML body, a text body or both, whose
 * strings may hold `{{variable}}` placeholders filled from a task's variables.
 *
 * Placeholders follow the LINE template's rules exactly (`shared/campaign/template.ts`): a name is
 * one or more characters that are neither braces nor white space, white space inside the braces
 * is allowed (`{{ name }}`), and a name the task lacks (an own property; `__proto__` is just a
 * name) throws that module's {@link MissingVariableError}. A unit test pins the two together.
 *
 * Values are inserted as plain text. In the HTML body they are HTML-escaped (`& < > " '`), so a
 * customer named `<b>` is shown, not rendered, and a value can never open a tag or end an
 * attribute; the subject and the text body take them as they are. A subject that would carry a
 * line break once filled is refused ({@link SubjectLineBreakError}): CR or LF in a header is how
 * header injection starts, and SES has no business folding a customer's data into new headers.
 *
 * Rendering here ({@link renderEmail}) and sending SES "Simple" content is the primary path. For a
 * broker that wants SES to substitute instead (`SendBulkEmail` with inline `TemplateContent` and
 * per-entry `ReplacementTemplateData`), {@link sesTemplateContent} and {@link sesTemplateData}
 * produce the same bytes. What the SES documentation says about its Handlebars renderer:
 * - "SES doesn't escape HTML content when rendering the HTML template for a message. This means
 *   if you're including user inputted data ... you will need to escape it on the client side."
 *   (https://docs.aws.amazon.com/ses/latest/dg/send-personalized-email-advanced.html). So SES does
 *   *not* HTML-escape `{{x}}` the way stock Handlebars does, in the HTML part or elsewhere, and
 *   nothing says it escapes the subject or the text part either.
 * - With inline template content, "Amazon SES supports only simple substitutions"
 *   (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_Template.html), and the template
 *   data is one JSON object of at most 262,144 characters shared by all parts.
 * Hence the SES form renames every placeholder: `{{v0}}` (the raw value) in the subject and text,
 * `{{h0}}` (the value escaped here) in the HTML. One data object then serves all three parts, a
 * customer's variable names never reach Handlebars (a name like `#each` or `../x` is only a name
 * here), and literal braces or a backslash that Handlebars would read are refused up front.
 */
import { MissingVariableError, variableValue } from '#shared/campaign/template.ts';
import { EmailError } from './errors.ts';

export { MissingVariableError };

/** RFC 5322 §2.1.1: a header line is at most 998 characters. */
export const MAX_SUBJECT_CHARS = 998;
/** SES's limit on `TemplateData` / `ReplacementTemplateData` (API_Template, API_ReplacementTemplate). */
export const MAX_SES_TEMPLATE_DATA_CHARS = 262_144;

/** The same expression as `shared/campaign/template.ts` (a unit test checks they agree). */
const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;
const LINE_BREAK = /[\r\n\0]/;
const HTML_SPECIALS = /[&<>"']/g;
const HTML_ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export interface EmailTemplate {
  readonly subject: string;
  /** The HTML body; values filled in here are HTML-escaped. An empty string counts as absent. */
  readonly html?: string;
  /** The plain-text body. An empty string counts as absent. */
  readonly text?: string;
}

/** One recipient's email: the template with every placeholder filled. */
export interface RenderedEmail {
  readonly subject: string;
  readonly html?: string;
  readonly text?: string;
}

/** SES v2 `EmailTemplateContent`, spelled as the API spells it (no SDK import in the domain). */
export interface SesTemplateContent {
  readonly Subject: string;
  readonly Html?: string;
  readonly Text?: string;
}

export class InvalidEmailTemplateError extends EmailError {}

/** A value filled into the subject would put a line break (or NUL) in the Subject header. */
export class SubjectLineBreakError extends EmailError {
  /** The variable whose value holds the line break (a template's own subject cannot: it is validated). */
  readonly variable: string;
  constructor(variable: string) {
    super(`the value of {{${variable}}} contains a line break, which a subject cannot hold`);
    this.variable = variable;
  }
}

/** A part's literal text and placeholder names, split once: `literals.length === names.length + 1`. */
interface Part {
  readonly literals: readonly string[];
  readonly names: readonly string[];
}

interface CompiledEmailTemplate {
  readonly subject: Part;
  readonly html: Part | undefined;
  readonly text: Part | undefined;
  /** Names in order of first use: subject, then HTML, then text. */
  readonly variables: ReadonlySet<string>;
}

const compiled = new WeakMap<EmailTemplate, CompiledEmailTemplate>();

/** The variable names the template uses, in all its parts, in order of first use. */
export function emailTemplateVariables(template: EmailTemplate): ReadonlySet<string> {
  return compile(template).variables;
}

/**
 * The problems that keep a template from being used for a job, in plain words; empty when there
 * are none. Takes anything, as a job-creation request may carry anything.
 */
export function validateEmailTemplate(template: unknown): string[] {
  if (template === null || typeof template !== 'object' || Array.isArray(template)) {
    return ['an email template is an object with a subject and an html or text body'];
  }
  const { subject, html, text } = template as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof subject !== 'string') problems.push('the subject is missing');
  else {
    if (subject.trim() === '') problems.push('the subject is empty');
    if (subject.length > MAX_SUBJECT_CHARS) {
      problems.push(`the subject is ${subject.length} characters long; at most ${MAX_SUBJECT_CHARS}`);
    }
    if (LINE_BREAK.test(subject)) problems.push('the subject contains a line break');
  }
  for (const [part, value] of [
    ['html', html],
    ['text', text],
  ] as const) {
    if (value !== undefined && typeof value !== 'string') problems.push(`the ${part} body must be text`);
  }
  const hasBody = (typeof html === 'string' && html !== '') || (typeof text === 'string' && text !== '');
  if (!hasBody) problems.push('there is no body: give html, text or both');
  for (const [part, value] of [
    ['subject', subject],
    ['html body', html],
    ['text body', text],
  ] as const) {
    if (typeof value === 'string' && value.replace(PLACEHOLDER, '').includes('{{')) {
      problems.push(
        `the ${part} has a "{{" that does not start a placeholder ({{name}}: a name without spaces or braces, then "}}")`,
      );
    }
  }
  return problems;
}

/**
 * One recipient's email. Throws {@link MissingVariableError} for a name the variables lack and
 * {@link SubjectLineBreakError} for a subject that would hold a line break.
 */
export function renderEmail(
  template: EmailTemplate,
  variables: Readonly<Record<string, string>>,
): RenderedEmail {
  const { subject, html, text } = compile(template);
  refuseLineBreaks(subject, variables);
  return {
    subject: render(subject, variables, plain),
    ...(html ? { html: render(html, variables, escapeHtml) } : {}),
    ...(text ? { text: render(text, variables, plain) } : {}),
  };
}

/**
 * The template as SES `TemplateContent`, its placeholders renamed (`{{v0}}` raw in the subject and
 * text, `{{h0}}` escaped in the HTML; the number is the name's index in
 * {@link emailTemplateVariables}). Throws {@link InvalidEmailTemplateError} when literal text
 * around a placeholder would mean something to Handlebars (`{{`, `}}`, a brace or backslash
 * against a placeholder).
 */
export function sesTemplateContent(template: EmailTemplate): SesTemplateContent {
  const { subject, html, text, variables } = compile(template);
  const index = new Map([...variables].map((name, i) => [name, i]));
  const rename = (part: Part, label: string, prefix: 'v' | 'h') => {
    checkHandlebarsLiterals(part, label);
    let out = part.literals[0]!;
    part.names.forEach((name, i) => {
      out += `{{${prefix}${index.get(name)}}}${part.literals[i + 1]}`;
    });
    return out;
  };
  return {
    Subject: rename(subject, 'subject', 'v'),
    ...(html ? { Html: rename(html, 'html body', 'h') } : {}),
    ...(text ? { Text: rename(text, 'text body', 'v') } : {}),
  };
}

/**
 * One recipient's SES `TemplateData` (or `ReplacementTemplateData`) for {@link sesTemplateContent}
 * of the same template: a JSON object of `v<i>` (raw) and `h<i>` (HTML-escaped) values. Takes the
 * template because the keys are its placeholders' positions. Throws as {@link renderEmail} does,
 * and a RangeError past SES's 262,144 characters.
 */
export function sesTemplateData(
  template: EmailTemplate,
  variables: Readonly<Record<string, string>>,
): string {
  const { subject, html, text, variables: names } = compile(template);
  const raw = new Set([...subject.names, ...(text?.names ?? [])]);
  const escaped = new Set(html?.names ?? []);
  const data: Record<string, string> = {};
  [...names].forEach((name, i) => {
    const value = variableValue(variables, name);
    if (raw.has(name)) data[`v${i}`] = value;
    if (escaped.has(name)) data[`h${i}`] = escapeHtml(value);
  });
  refuseLineBreaks(subject, variables);
  const json = JSON.stringify(data);
  if (json.length > MAX_SES_TEMPLATE_DATA_CHARS) {
    throw new RangeError(
      `template data is ${json.length} characters; SES takes at most ${MAX_SES_TEMPLATE_DATA_CHARS}`,
    );
  }
  return json;
}

/** `& < > " '` as HTML character references: safe in element content and in quoted attributes. */
export function escapeHtml(value: string): string {
  return value.replace(HTML_SPECIALS, (c) => HTML_ENTITIES[c]!);
}

function compile(template: EmailTemplate): CompiledEmailTemplate {
  const cached = compiled.get(template);
  if (cached) return cached;
  const problems = validateEmailTemplate(template);
  if (problems.length > 0)
    throw new InvalidEmailTemplateError(`invalid email template: ${problems.join('; ')}`);
  const subject = split(template.subject);
  const html = template.html ? split(template.html) : undefined;
  const text = template.text ? split(template.text) : undefined;
  const variables = new Set([...subject.names, ...(html?.names ?? []), ...(text?.names ?? [])]);
  const result = { subject, html, text, variables };
  compiled.set(template, result);
  return result;
}

function split(source: string): Part {
  const literals: string[] = [];
  const names: string[] = [];
  let last = 0;
  for (const match of source.matchAll(PLACEHOLDER)) {
    literals.push(source.slice(last, match.index));
    names.push(match[1]!);
    last = match.index + match[0].length;
  }
  literals.push(source.slice(last));
  return { literals, names };
}

function render(
  part: Part,
  variables: Readonly<Record<string, string>>,
  encode: (v: string) => string,
): string {
  let out = part.literals[0]!;
  for (let i = 0; i < part.names.length; i++) {
    out += encode(variableValue(variables, part.names[i]!)) + part.literals[i + 1]!;
  }
  return out;
}

function plain(value: string): string {
  return value;
}

/** Throws for the first subject variable that is missing or whose value holds a line break. */
function refuseLineBreaks(subject: Part, variables: Readonly<Record<string, string>>): void {
  const broken = subject.names.find((name) => LINE_BREAK.test(variableValue(variables, name)));
  if (broken !== undefined) throw new SubjectLineBreakError(broken);
}

function checkHandlebarsLiterals(part: Part, label: string): void {
  part.literals.forEach((literal, i) => {
    const before = i < part.names.length && /[{\\]$/.test(literal);
    const after = i > 0 && literal.startsWith('}');
    if (literal.includes('{{') || literal.includes('}}') || before || after) {
      throw new InvalidEmailTemplateError(
        `the ${label} has braces or a backslash that SES's template engine would read; render it locally instead`,
      );
    }
  });
}
