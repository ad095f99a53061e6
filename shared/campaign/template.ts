/**
 * Message templates of a `message` job: LINE message objects whose strings may hold `{{variable}}`
 * placeholders, filled from a task's variables. Nothing is escaped: LINE text is plain text, and
 * the body is JSON-serialised afterwards. A template without placeholders is the same for every
 * recipient, so its tasks can go out by multicast.
 */
import type { OutgoingMessage } from '#shared/line/messaging-client.ts';

/** LINE takes at most this many messages in one push or multicast. */
export const MAX_MESSAGES_PER_REQUEST = 5;

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

export interface MessageTemplate {
  /** 1 to 5 LINE message objects; any string inside may hold `{{variable}}` placeholders. */
  readonly messages: readonly OutgoingMessage[];
  /** Deliver without a notification sound. */
  readonly notificationDisabled?: boolean;
}

export class InvalidTemplateError extends Error {
  override name = 'InvalidTemplateError';
}

/** A task's variables lack one the template uses. */
export class MissingVariableError extends Error {
  override name = 'MissingVariableError';
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
        : (variables) => mapStrings(messages, (s) => fill(s, variables)) as readonly OutgoingMessage[],
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

/** Fills `{{name}}` in one string; throws {@link MissingVariableError} for an unknown name. */
export function fill(text: string, variables: Readonly<Record<string, string>>): string {
  return text.replace(PLACEHOLDER, (_, name: string) => {
    const value = Object.hasOwn(variables, name) ? variables[name] : undefined;
    if (value === undefined) throw new MissingVariableError(name);
    return value;
  });
}

function visitStrings(value: unknown, visit: (s: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) for (const v of value) visitStrings(v, visit);
  else if (value !== null && typeof value === 'object')
    for (const v of Object.values(value)) visitStrings(v, visit);
}

// Keys keep their order, so the same template and variables always serialise to the same bytes.
function mapStrings(value: unknown, map: (s: string) => string): unknown {
  if (typeof value === 'string') return map(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, map));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapStrings(v, map)]));
  }
  return value;
}
