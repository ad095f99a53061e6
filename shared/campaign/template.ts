/**
 * Message templates of a `message` job: LINE message objects whose strings may hold `{{variable}}`
 * placeholders, filled from a task's variables. Nothing is escaped: LINE text is plain text, and
 * the body is JSON-serialised afterwards. A template without placeholders is the same for every
 * recipient, so its tasks can go out by multicast.
 */

import { isNameHeader } from '#shared/csv/headers.ts';
import type { OutgoingMessage } from '#shared/line/messaging-client.ts';
import { CampaignError } from './errors.ts';

/** LINE takes at most this many messages in one push or multicast. */
export const MAX_MESSAGES_PER_REQUEST = 5;

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

export interface MessageTemplate {
  /** 1 to 5 LINE message objects; any string inside may hold `{{variable}}` placeholders. */
  readonly messages: readonly OutgoingMessage[];
  /** Deliver without a notification sound. */
  readonly notificationDisabled?: boolean;
}

export class InvalidTemplateError extends CampaignError {}

/** A task's variables lack one the template uses. */
export class MissingVariableError extends CampaignError {
  readonly variable: string;
  constructor(variable: string) {
    super(`the template uses {{${variable}}}, which the task does not have`);
    this.variable = variable;
  }
}

export interface CompiledTemplate {
  readonly template: MessageTemplate;
  /** Variable names used, in order of first use; empty means the same messages for everyone. */
  readonly variables: readonly string[];
  /** The messages for one recipient. Throws {@link MissingVariableError}. */
  render(variables: Readonly<Record<string, string>>): readonly OutgoingMessage[];
}

const compiled = new WeakMap<MessageTemplate, CompiledTemplate>();

/**
 * Checks a template and finds its placeholders once; the result is cached per template object,
 * so a job whose tasks share one template object compiles it once.
 */
export function compileTemplate(template: MessageTemplate): CompiledTemplate {
  const cached = compiled.get(template);
  if (cached) return cached;
  const { messages } = template;
  if (!Array.isArray(messages) || messages.length < 1 || messages.length > MAX_MESSAGES_PER_REQUEST) {
    throw new InvalidTemplateError(
      `a template has 1 to ${MAX_MESSAGES_PER_REQUEST} messages, got ${Array.isArray(messages) ? messages.length : typeof messages}`,
    );
  }
  const used: string[] = [];
  visitStrings(messages, (s) => {
    for (const match of s.matchAll(PLACEHOLDER)) if (!used.includes(match[1]!)) used.push(match[1]!);
  });
  const result: CompiledTemplate = {
    template,
    variables: used,
    render:
      used.length === 0
        ? () => messages
        : (renderer(messages)! as (
            variables: Readonly<Record<string, string>>,
          ) => readonly OutgoingMessage[]),
  };
  compiled.set(template, result);
  return result;
}

/**
 * True when a job's message is the same for every recipient (a valid template without
 * placeholders): its recipients may be held in chunks and sent as multicasts.
 */
export function isSharedMessage(template: MessageTemplate | undefined): boolean {
  if (!template) return false;
  try {
    return compileTemplate(template).variables.length === 0;
  } catch {
    return false;
  }
}

/**
 * A placeholder's value: the variable of that name; for a name the list's name column goes by
 * (`{{お名前}}`, `{{氏名}}`, `{{Name}}` …: the ingest keeps that column as the task's `name`, not
 * under its header), the task's name. Throws {@link MissingVariableError} for an unknown name.
 */
export function variableValue(variables: Readonly<Record<string, string>>, name: string): string {
  const value = Object.hasOwn(variables, name) ? variables[name] : undefined;
  if (typeof value === 'string') return value;
  const named = Object.hasOwn(variables, 'name') ? variables.name : undefined;
  if (typeof named === 'string' && isNameHeader(name)) return named;
  throw new MissingVariableError(name);
}

/** Fills `{{name}}` in one string; throws {@link MissingVariableError} for an unknown name. */
export function fill(text: string, variables: Readonly<Record<string, string>>): string {
  return text.replace(PLACEHOLDER, (_, name: string) => variableValue(variables, name));
}

function visitStrings(value: unknown, visit: (s: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) for (const v of value) visitStrings(v, visit);
  else if (value !== null && typeof value === 'object')
    for (const v of Object.values(value)) visitStrings(v, visit);
}

type Render = (variables: Readonly<Record<string, string>>) => unknown;

/**
 * A template's value as a function of the variables, planned once; undefined for a part without
 * placeholders, which is rendered as the template's own (shared, never changed). A string with
 * some is its literal pieces and names. Keys keep their order, so the same template and variables
 * always serialise to the same bytes.
 */
function renderer(value: unknown): Render | undefined {
  if (typeof value === 'string') return stringRenderer(value);
  if (value === null || typeof value !== 'object') return undefined;
  const parts = Object.entries(value).map(([key, v]) => [key, v, renderer(v)] as const);
  if (parts.every(([, , render]) => render === undefined)) return undefined;
  const at = (v: unknown, render: Render | undefined, variables: Readonly<Record<string, string>>) =>
    render ? render(variables) : v;
  if (Array.isArray(value)) return (variables) => parts.map(([, v, render]) => at(v, render, variables));
  return (variables) => {
    const out: Record<string, unknown> = {};
    // defineProperty: a key named `__proto__` stays a key (as JSON.parse made it), not a prototype.
    for (const [key, v, render] of parts)
      Object.defineProperty(out, key, {
        value: at(v, render, variables),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  };
}

/** `{{name}}` filled in one string, its pieces split once (as {@link fill}); undefined without any. */
function stringRenderer(text: string): Render | undefined {
  const literals: string[] = [];
  const names: string[] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    literals.push(text.slice(last, match.index));
    names.push(match[1]!);
    last = match.index + match[0].length;
  }
  if (names.length === 0) return undefined;
  const tail = text.slice(last);
  return (variables) => {
    let out = '';
    for (let i = 0; i < names.length; i++) {
      out += literals[i]! + variableValue(variables, names[i]!);
    }
    return out + tail;
  };
}
