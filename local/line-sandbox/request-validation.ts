/**
 * Checks Messaging API send requests the way LINE answers them: a 400 with `{ message, details }`,
 * where each detail names the offending `property` (e.g. `messages[0].text`).
 */
import { z } from 'zod';
import type { SendEndpoint } from '#shared/line/messaging-client.ts';

/** Most messages per request (reply, push, multicast). */
export const MAX_MESSAGES = 5;
/** Most recipients of one multicast. */
export const MAX_MULTICAST_RECIPIENTS = 500;
/** Longest text message, in characters. */
export const MAX_TEXT_LENGTH = 5000;

export interface LineErrorBody {
  readonly message: string;
  readonly details?: readonly { readonly message: string; readonly property: string }[];
}

const messageSchema = z.looseObject({ type: z.string().min(1) }).superRefine((message, ctx) => {
  if (message.type !== 'text') return;
  const text = message['text'];
  if (typeof text !== 'string' || text.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['text'], message: 'May not be empty' });
  } else if (text.length > MAX_TEXT_LENGTH) {
    ctx.addIssue({
      code: 'custom',
      path: ['text'],
      message: `Length must be between 0 and ${MAX_TEXT_LENGTH}`,
    });
  }
});

const messagesSchema = z
  .array(messageSchema, { error: 'Must be an array' })
  .min(1, `Size must be between 1 and ${MAX_MESSAGES}`)
  .max(MAX_MESSAGES, `Size must be between 1 and ${MAX_MESSAGES}`);

const common = {
  messages: messagesSchema,
  notificationDisabled: z.boolean({ error: 'Must be a boolean' }).optional(),
};

const bodySchemas = {
  reply: z.looseObject({
    replyToken: z.string({ error: 'May not be empty' }).min(1, 'May not be empty'),
    ...common,
  }),
  push: z.looseObject({ to: z.string({ error: 'May not be empty' }).min(1, 'May not be empty'), ...common }),
  multicast: z.looseObject({
    to: z
      .array(z.string().min(1, 'May not be empty'), { error: 'Must be an array' })
      .min(1, `Size must be between 1 and ${MAX_MULTICAST_RECIPIENTS}`)
      .max(MAX_MULTICAST_RECIPIENTS, `Size must be between 1 and ${MAX_MULTICAST_RECIPIENTS}`),
    ...common,
  }),
} as const;

export type ReplyBody = z.infer<(typeof bodySchemas)['reply']>;
export type PushBody = z.infer<(typeof bodySchemas)['push']>;
export type MulticastBody = z.infer<(typeof bodySchemas)['multicast']>;
export type SendBody = ReplyBody | PushBody | MulticastBody;

export type Checked<T> =
  | { readonly ok: true; readonly body: T }
  | { readonly ok: false; readonly error: LineErrorBody };

/** Parses and checks a send request body; on failure, the error body LINE would answer with. */
export function checkSendBody(endpoint: SendEndpoint, text: string): Checked<SendBody> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: { message: 'The request body could not be parsed as JSON' } };
  }
  const result = bodySchemas[endpoint].safeParse(json);
  if (result.success) return { ok: true, body: result.data };
  const details = result.error.issues.map((issue) => ({
    message: issue.message,
    property: formatProperty(issue.path),
  }));
  return { ok: false, error: { message: `The request body has ${details.length} error(s)`, details } };
}

function formatProperty(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}
