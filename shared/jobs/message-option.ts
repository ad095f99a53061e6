/**
 * A LINE job's `message` option as an operator gives it (`validation.ts` reads the rest of a job's
 * options): a string (one text message) or `{ messages: [...], notificationDisabled? }`.
 */
import { z } from 'zod';
import { compileTemplate, type MessageTemplate } from '#shared/campaign/template.ts';
import { MAX_TEXT_LENGTH, messageObjectProblems } from '#shared/line/message-objects.ts';

/**
 * A message job's message: a string (one text message) or `{ messages: [...], notificationDisabled? }`
 * with 1 to 5 LINE message objects, each checked by LINE's rules for its type
 * (`shared/line/message-objects.ts`).
 */
const textMessageSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_TEXT_LENGTH, `must be at most ${MAX_TEXT_LENGTH} characters`);
/** Most levels of nesting a message may have (a flex bubble needs about ten; DynamoDB stores 32). */
const MAX_MESSAGE_DEPTH = 20;
/** Most bytes of a message as JSON (LINE's flex bubble is at most 30 KB; five messages fit). */
const MAX_MESSAGE_BYTES = 64 * 1024;

/** How deeply `value` nests (objects and arrays), counted without recursion; stops past `limit`. */
function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth);
    if (deepest > limit) return deepest;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

const templateMessageSchema = z.strictObject({
  messages: z
    .array(z.unknown(), 'must be a list of LINE message objects')
    .min(1, 'must hold at least one message')
    .max(5, 'LINE takes at most 5 messages in one push')
    .superRefine((messages, ctx) => {
      for (const problem of messageObjectProblems(messages)) {
        ctx.addIssue({ code: 'custom', path: [...problem.path], message: problem.message });
      }
    }),
  notificationDisabled: z.boolean().optional(),
});
/** Chosen by the input's type, so each mistake is named where it is (not "Invalid input"). */
export const messageSchema = z.unknown().superRefine((value, ctx) => {
  if (value instanceof UnreadableJson) {
    ctx.addIssue({ code: 'custom', message: 'starts with { but is not valid JSON' });
    return;
  }
  if (typeof value === 'object' && value !== null) {
    if (nestingDepth(value, MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH) {
      ctx.addIssue({ code: 'custom', message: `is nested more than ${MAX_MESSAGE_DEPTH} levels deep` });
      return;
    }
    const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
    if (bytes > MAX_MESSAGE_BYTES) {
      ctx.addIssue({ code: 'custom', message: `is ${bytes} bytes as JSON; at most ${MAX_MESSAGE_BYTES}` });
      return;
    }
  }
  const schema = typeof value === 'string' ? textMessageSchema : templateMessageSchema;
  const parsed = schema.safeParse(value);
  if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ ...issue } as never);
}) as unknown as z.ZodType<string | z.infer<typeof templateMessageSchema>>;

/** A query-string `message` that looks like JSON but does not parse: refused, never sent as text. */
export class UnreadableJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export function toTemplate(message: z.infer<typeof messageSchema>): MessageTemplate {
  const template: MessageTemplate =
    typeof message === 'string'
      ? { messages: [{ type: 'text', text: message }] }
      : (message as MessageTemplate);
  compileTemplate(template);
  return template;
}
